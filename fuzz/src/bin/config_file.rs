//! AFL entry point of the `config_file` target (see `tenure_fuzz::config_file`).

fn main() {
    afl::fuzz!(|data: &[u8]| tenure_fuzz::config_file::run(data));
}
