//! AFL entry point of the `wire` target (see `tenure_fuzz::wire`).

fn main() {
    afl::fuzz!(|data: &[u8]| tenure_fuzz::wire::run(data));
}
