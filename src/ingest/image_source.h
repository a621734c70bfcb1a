// JPEG and PNG sources: one file, one sample. Two layouts:
//   ImageFolder: ROOT/<class>/.../<file>, classes = the subdirectories of ROOT sorted by name (as
//     torchvision's ImageFolder; hidden ones, starting with '.', are skipped), the label column `label`
//     INT32 = the class's index, the class names in the `stoke.classes` metadata. Images directly in
//     ROOT are ignored then.
//   With a labels CSV: every image under ROOT (any depth), joined on the `file` column holding the
//     path relative to ROOT; no class directories needed, no `label` column of stoke's own.
// Columns: width, height, channels (INT32, from each image's header) and `image`, the encoded file
// bytes unchanged in a blob column (one image per page). The `stoke.images` metadata names the
// formats present.
#pragma once

#include <map>
#include <optional>
#include <string_view>

#include "ingest/source.h"

namespace stoke {

// Lists the images under set->root for the layout above (recursively, through Storage::List) into
// set->files (names relative to root) and set->classes. A class directory without images, or a
// source file of another kind among the images, is an error (unless options.format says images).
Status ListImages(const SourceOptions& options, std::string_view what, SourceSet* set);

// Plans set->files (listed, sorted, kind kImages): the label column (classes or the labels CSV), the
// columns, items, metadata and reader. Headers are read when rows are written, not here.
Status PlanImages(const SourceOptions& options, std::string_view what, SourceSet* set);

// Appending images to a table (`table_configuration`: its Delta configuration): the sources with
// their labels renumbered to the table's classes (classes the table lacks come after its own, in
// name order, so that existing labels keep their meaning) and with the image formats of both in
// their metadata; nullopt when the table's metadata already covers them. Corruption when the table's
// metadata is not what stoke writes.
Result<std::optional<SourceSet>> MergeImageMetadata(const std::map<std::string, std::string>& table_configuration,
                                                    const SourceSet& sources);

}  // namespace stoke
