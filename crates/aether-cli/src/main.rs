//! The `aether` binary; everything happens in `aether_cli::run`.

// Every call allocates many small, short-lived strings and JSON values; mimalloc serves that
// pattern markedly faster than the system allocator (measured: docs/BENCHMARKS.md).
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    aether_cli::run()
}
