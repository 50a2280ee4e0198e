//! `tether-render`: the Jsonnet child on its own, for tests and for
//! programs that render without the `tether` binary at hand (the `tether`
//! binary answers the same `__render-jsonnet` call).

use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.split_first() {
        Some((first, rest)) if first == tether_source::render::JSONNET_CHILD => {
            tether_source::render::jsonnet_child(rest)
        }
        _ => {
            eprintln!(
                "usage: tether-render {} MAX_MEMORY_BYTES < request.json",
                tether_source::render::JSONNET_CHILD
            );
            ExitCode::from(2)
        }
    }
}
