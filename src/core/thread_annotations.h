// Clang thread-safety annotations (https://clang.llvm.org/docs/ThreadSafetyAnalysis.html), as in
// Abseil and LevelDB. They state which mutex guards a member and which lock a function needs, and
// `make check-threads` (scripts/check_threads.sh) has clang prove the code obeys them. Other
// compilers see nothing. Use them with core/mutex.h: std::mutex carries no capability attributes.
#pragma once

#if defined(__clang__)
#define STOKE_THREAD_ANNOTATION_(x) __attribute__((x))
#else
#define STOKE_THREAD_ANNOTATION_(x)
#endif

// On a member: reading it needs `x` held (shared or exclusive), writing it needs `x` held exclusively.
#ifndef GUARDED_BY
#define GUARDED_BY(x) STOKE_THREAD_ANNOTATION_(guarded_by(x))
#endif

// On a pointer member: the pointer itself is free, what it points to is guarded by `x`.
#ifndef PT_GUARDED_BY
#define PT_GUARDED_BY(x) STOKE_THREAD_ANNOTATION_(pt_guarded_by(x))
#endif

// On a function: the caller must hold the capabilities exclusively (REQUIRES) or at least shared.
#ifndef REQUIRES
#define REQUIRES(...) STOKE_THREAD_ANNOTATION_(requires_capability(__VA_ARGS__))
#endif
#ifndef REQUIRES_SHARED
#define REQUIRES_SHARED(...) STOKE_THREAD_ANNOTATION_(requires_shared_capability(__VA_ARGS__))
#endif

// On a function: the caller must not hold the capabilities (the function takes them itself).
#ifndef EXCLUDES
#define EXCLUDES(...) STOKE_THREAD_ANNOTATION_(locks_excluded(__VA_ARGS__))
#endif

// On a function: it acquires / releases the capabilities (with no argument inside a capability
// class: the object itself).
#ifndef ACQUIRE
#define ACQUIRE(...) STOKE_THREAD_ANNOTATION_(acquire_capability(__VA_ARGS__))
#endif
#ifndef RELEASE
#define RELEASE(...) STOKE_THREAD_ANNOTATION_(release_capability(__VA_ARGS__))
#endif

// On a function returning bool: it acquired the capabilities exactly when it returned `ok`.
#ifndef TRY_ACQUIRE
#define TRY_ACQUIRE(...) STOKE_THREAD_ANNOTATION_(try_acquire_capability(__VA_ARGS__))
#endif

// On a function: the analysis assumes the capability held after the call (the function checks it,
// or the caller knows it by a protocol the analysis cannot follow).
#ifndef ASSERT_CAPABILITY
#define ASSERT_CAPABILITY(x) STOKE_THREAD_ANNOTATION_(assert_capability(x))
#endif

// On a class: its objects are capabilities (locks); `x` names the kind in warnings ("mutex").
#ifndef CAPABILITY
#define CAPABILITY(x) STOKE_THREAD_ANNOTATION_(capability(x))
#endif

// On a class: an RAII holder; its constructor acquires and its destructor releases.
#ifndef SCOPED_CAPABILITY
#define SCOPED_CAPABILITY STOKE_THREAD_ANNOTATION_(scoped_lockable)
#endif

// On a function returning a reference to a capability: which one it is.
#ifndef RETURN_CAPABILITY
#define RETURN_CAPABILITY(x) STOKE_THREAD_ANNOTATION_(lock_returned(x))
#endif

// On a function: not analysed. Every use says why the analysis cannot follow it.
#ifndef NO_THREAD_SAFETY_ANALYSIS
#define NO_THREAD_SAFETY_ANALYSIS STOKE_THREAD_ANNOTATION_(no_thread_safety_analysis)
#endif
