// Package load finds and opens the NVIDIA shared libraries that the native
// bindings use (libcuda, libnvrtc, libcublasLt, libcublas, libnvidia-ml,
// libnccl), resolves their symbols and reports where each library was
// found or what was tried.
//
// Read [Open] and [Spec] first; [Library] is what a successful search
// returns and [NotFoundError] what a failed one returns. Both carry the
// list of [Attempt]s, which "vram doctor" prints.
//
// # Search order
//
// For each library, [Open] tries its sonames (newest CUDA major first) in
// each of these places, in this order, and stops at the first that loads:
//
//  1. the directories given to [SetDirs] (vram.Config.CUDALibs, or the
//     ':'-separated VRAM_CUDA_LIBS that vram.ConfigFromEnv reads);
//  2. the dynamic loader's own search (LD_LIBRARY_PATH, the ldconfig cache,
//     the system directories), by dlopen of the bare soname;
//  3. /usr/local/cuda/lib64 and /usr/local/cuda/targets/*/lib, plus the
//     spec's extra directories (the driver's /usr/local/nvidia/lib64);
//  4. the nvidia/*/lib folders of Python environments: $VIRTUAL_ENV,
//     $CONDA_PREFIX, /usr/local/lib/python3*/dist-packages,
//     /usr/lib/python3/dist-packages, and last the sys.path of every python3
//     on PATH (asked by running it, with a two-second limit).
//
// A directory given there therefore wins over the system's copy, and a
// CUDA 12 library found there is used even where the system has CUDA 13.
//
// Of vram's settings the package reads none from the environment: the
// directories of step 1 come from [SetDirs]. The other steps are the
// system's own places, found as the loader and Python find them (PATH,
// VIRTUAL_ENV and CONDA_PREFIX are read at each search, as the loader reads
// LD_LIBRARY_PATH).
//
// # Binding symbols
//
// [Library.Bind] resolves a table of [Binding]s: each names its C symbol
// (and older fallbacks, tried in order), a pointer to a Go func variable
// whose type mirrors the C signature, and optionally a place for the raw
// address that hot calls pass to purego.SyscallN. [CheckTable] holds such
// a table against a checked-in TSV file (see its doc comment for the
// format), so that a wrong argument width is caught by a CPU test.
//
// # Loading once
//
// A bindings package keeps a [Loader] per library: its Load opens the
// library and binds the table the first time it succeeds, and its Ready
// tells the package's wrappers, at the cost of one atomic load, whether
// they may call through the bindings (before that they return the error
// that [NotLoaded] writes).
//
// # Concurrency
//
// [Open] and [Library.Bind] may be called from any goroutine; [Loader]
// serialises the loading of its library, and holds its library's state.
// The only state the package itself keeps between calls is the list of
// [SetDirs], under a lock.
package load
