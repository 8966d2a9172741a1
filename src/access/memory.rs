//! Keeping the process's resident memory close to its live heap.
//!
//! The node cache's relist and a confirmation's fallback node list decode pages of node
//! metadata (several MiB of JSON and many small strings each) that die right after. With
//! glibc's defaults (one arena per thread, a dynamic mmap threshold that grows to the largest
//! block freed), those pages stay resident: at 5,000 realistic nodes the guard sat at about
//! twice its live heap (BENCHMARKS.md, "Cluster benchmark"). So: one arena, a fixed mmap
//! threshold (large blocks go straight back to the system), and a trim after each big read.
//! Elsewhere (musl, other systems) these are no-ops.

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
