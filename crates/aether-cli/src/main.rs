//! The `aether` binary; everything happens in `aether_cli::run`.
fn main() -> std::process::ExitCode {
    aether_cli::run()
}
