//! Any text as a condition: the parser returns a tree or an error with a span inside the
//! text, never panics.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(src) = std::str::from_utf8(data) else { return };
    match harrier_rules::parser::parse(src) {
        Ok(ast) => {
            let s = ast.span();
            assert!(s.start <= s.end && s.end <= src.len());
        }
        Err(e) => assert!(e.span.start <= src.len(), "error span {:?} outside {} bytes", e.span, src.len()),
    }
});
