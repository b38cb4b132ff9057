//! AFL entry point of the `state_file` target (see `tenure_fuzz::state_file`).

fn main() {
    afl::fuzz!(|data: &[u8]| tenure_fuzz::state_file::run(data));
}
