"""The loader's CUDA path, Loader(device="cuda"), where torch sees a CUDA device.

Batches come out as tensors on the GPU, copied asynchronously from the loader's pinned batch
buffers; a buffer goes back to the loader only after its copy finished. The tests check the values
against the source .npy files while the GPU's stream is kept busy, so that every copy is still
queued when the consumer asks for the next batch: a buffer handed back too early would be refilled
under its copy and a sample would come out wrong.

Skipped where torch sees no CUDA device (CI has none). On a machine with one:

    STOKE_BIN=build/stoke python3 -m pytest -q python/tests/test_cuda.py
"""

import numpy as np
import pytest

from stoke_env import import_stoke, synth_table

stoke = import_stoke()
torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("torch sees no CUDA device", allow_module_level=True)

N = 240
SHAPE = (32, 32, 8)  # with 4 channels: 128 KiB of float32 per sample, 2 MiB per batch of 16
CHANNELS = 4
BATCH = 16


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    src, table = synth_table(tmp_path_factory.mktemp("cuda"), N, SHAPE, CHANNELS, seed=5, rows_per_file=80)
    return dict(src=src, table=table)


def expected(data, files):
    return np.stack([np.load(data["src"] / f) for f in files])


def busy(cycles=4_000_000):
    """Queues a kernel spinning for `cycles` GPU clocks (about 2 ms) on the current stream, so the
    copies queued after it wait."""
    torch.cuda._sleep(cycles)


def test_host_batches_are_pinned_when_built_with_cuda(data):
    torch.cuda.init()  # torch answers is_pinned() False for everything until its CUDA is initialised
    loader = stoke.Loader(data["table"], batch_size=BATCH, shuffle="none", threads=2)
    b = next(iter(loader))
    # torch asks the CUDA driver: memory stoke's runtime page-locked counts for torch's runtime too
    assert b["volume"].is_pinned() == stoke.built_with_cuda()


@pytest.mark.parametrize("device", ["cuda", "cuda:0"])
def test_batches_on_the_device_equal_the_source(data, device):
    # Room for about three batches: the loader must reuse its buffers many times over two epochs.
    loader = stoke.Loader(data["table"], batch_size=BATCH, seed=1, device=device,
                          prefetch_bytes=3 * BATCH * (128 << 10), threads=2)
    kept = []
    for epoch in range(2):
        for b in loader:
            assert b["volume"].is_cuda and b["volume"].dtype == torch.float32
            assert b["volume"].shape == (len(b["file"]),) + SHAPE + (CHANNELS,)
            assert b["__row_ids__"].is_cuda
            kept.append((list(b["file"]), b["volume"]))
            busy()  # the next batch's copy queues behind this
    torch.cuda.synchronize()
    assert len(kept) == 2 * (N // BATCH)
    for files, vol in kept:
        np.testing.assert_array_equal(vol.cpu().numpy(), expected(data, files))
    # each epoch delivered every sample once
    files = [f for fs, _ in kept for f in fs]
    assert sorted(files[: N]) == sorted(files[N:]) and len(set(files[: N])) == N


def test_next_batch_on_the_device(data):
    loader = stoke.Loader(data["table"], batch_size=BATCH, shuffle="none", device="cuda",
                          prefetch_bytes=2 * BATCH * (128 << 10), threads=1)
    got = []
    while (b := loader.next_batch()) is not None:
        busy()
        got.append((list(b["file"]), b["volume"]))
    torch.cuda.synchronize()
    assert sum(len(f) for f, _ in got) == N
    for files, vol in got:
        np.testing.assert_array_equal(vol.cpu().numpy(), expected(data, files))


def test_a_stream_of_the_callers_own(data):
    # Copies are issued on the current stream; a caller's side stream is respected.
    loader = stoke.Loader(data["table"], batch_size=BATCH, seed=4, device="cuda",
                          prefetch_bytes=3 * BATCH * (128 << 10), threads=2)
    side = torch.cuda.Stream()
    kept = []
    with torch.cuda.stream(side):
        for b in loader:
            busy()
            kept.append((list(b["file"]), b["volume"] * 1))  # work on the side stream, after the copy
    side.synchronize()
    for files, vol in kept:
        np.testing.assert_array_equal(vol.cpu().numpy(), expected(data, files))
