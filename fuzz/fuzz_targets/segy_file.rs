//! Any bytes as a SEG-Y file: the header parser (textual, binary and
//! extended headers, byte order, sample format, counts) and the trace-index
//! scanner (geometry) must answer with a value or an error, never a panic,
//! a hang or an allocation the file cannot justify.
#![no_main]

use std::path::PathBuf;

use cubeslab_core::{
    config::Parallelism,
    segy::{describe, Geometry, ScanOptions, SegyFile, SegyOptions},
};
use libfuzzer_sys::fuzz_target;

/// One file per fuzzing process, rewritten for each input (in memory when
/// /dev/shm exists).
fn scratch() -> PathBuf {
    let dir = if std::path::Path::new("/dev/shm").is_dir() {
        PathBuf::from("/dev/shm")
    } else {
        std::env::temp_dir()
    };
    dir.join(format!("cubeslab-fuzz-{}.sgy", std::process::id()))
}

fuzz_target!(|data: &[u8]| {
    let path = scratch();
    std::fs::write(&path, data).expect("scratch file");
    let one_thread = Parallelism {
        threads: 1,
        in_flight: 1,
    };
    for segy in [
        SegyOptions::default(),
        SegyOptions {
            allow_truncated: true,
            sample_interval_us: Some(4000.0),
            ..SegyOptions::default()
        },
    ] {
        if let Ok(file) = SegyFile::open(&path, &segy) {
            let _ = Geometry::scan(&file, &ScanOptions::default(), one_thread);
        }
    }
    let _ = describe(
        &path,
        &SegyOptions::default(),
        &ScanOptions::default(),
        one_thread,
    );
});
