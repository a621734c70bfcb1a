// Element types of tensors: the enum is public (stoke/dtype.h), as loader batches carry it.
#pragma once

#include "stoke/dtype.h"
