//! AFL entry point of the `http_json` target (see `tenure_fuzz::http_json`).

fn main() {
    afl::fuzz!(|data: &[u8]| tenure_fuzz::http_json::run(data));
}
