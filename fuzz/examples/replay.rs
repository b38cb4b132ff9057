//! Runs a target on files, without AFL: `cargo run -p tenure-fuzz --example
//! replay -- TARGET FILE...` (for instance the `crashes/` of an AFL run).
//! Prints each file's outcome; exits non-zero if any fails.

use std::process::ExitCode;

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let Some(name) = args.next() else {
        eprintln!("usage: replay TARGET FILE...");
        return ExitCode::FAILURE;
    };
    let Some(&(_, run)) = tenure_fuzz::TARGETS.iter().find(|(t, _)| *t == name) else {
        let names: Vec<_> = tenure_fuzz::TARGETS.iter().map(|(t, _)| *t).collect();
        eprintln!("no target {name}; the targets are {}", names.join(", "));
        return ExitCode::FAILURE;
    };
    let mut failed = 0;
    for file in args {
        let data = match std::fs::read(&file) {
            Ok(d) => d,
            Err(e) => {
                eprintln!("{file}: {e}");
                failed += 1;
                continue;
            }
        };
        let ok = std::panic::catch_unwind(|| run(&data)).is_ok();
        println!("{}: {file}", if ok { "ok" } else { "FAILED" });
        failed += usize::from(!ok);
    }
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
