//! Keeping resident memory close to the live heap: the node cache's relists and the fallback node
//! lists decode pages that die at once, and glibc's defaults kept them resident (twice the live
//! heap at 5,000 nodes, BENCHMARKS.md). So one arena, a fixed mmap threshold and a trim after each
//! big read; elsewhere (musl, other systems) these are no-ops.

/// Large blocks at or above this size are mmapped and unmapped when freed.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const MMAP_THRESHOLD: libc::c_int = 128 * 1024;
/// One arena for the whole process: the guard's few threads rarely allocate at the same
/// moment, and each extra arena kept a few MiB of its own free memory resident.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const ARENAS: libc::c_int = 1;

/// Tunes glibc's allocator; call first thing in `main`, before threads start.
pub fn tune_allocator() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets allocator parameters; called before other threads exist.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD);
        libc::mallopt(libc::M_ARENA_MAX, ARENAS);
    }
}

/// Returns free heap pages to the system, after a big transient read (a relist, a full node
/// list). Costs a walk of the heap: a few milliseconds, never on a request's path alone.
pub fn return_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim is thread-safe and only returns memory the allocator holds free.
    unsafe {
        libc::malloc_trim(0);
    }
}
