//! Links the addon the way Node loads it (napi-build's platform flags).
fn main() {
    napi_build::setup();
}
