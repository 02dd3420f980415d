//! Sets up the link of the Node addon (node's symbols are resolved when node loads it).
fn main() {
    napi_build::setup();
}
