//! Tests of the profile measurement.

use super::*;

#[test]
fn scratch_of_killed_profiles_is_removed_and_no_other() {
    let dir = tempfile::tempdir().unwrap();
    // Pids of processes that have exited.
    let dead = || {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        pid
    };
    let long_ago = std::time::SystemTime::now() - STALE_SCRATCH * 2;
    let folder = |name: String, aged: bool| {
        let path = dir.path().join(name);
        std::fs::create_dir(&path).unwrap();
        std::fs::write(path.join("reads.bin"), b"scratch").unwrap();
        if aged {
            File::open(&path).unwrap().set_modified(long_ago).unwrap();
        }
        path
    };
    let killed = folder(scratch_name(dead()), true);
    let just_killed = folder(scratch_name(dead()), false);
    let running = folder(scratch_name(std::process::id()), true);
    let not_ours = folder(".cubeslab-profile-notes.tmp".into(), true);
    assert_eq!(remove_stale_scratch(dir.path()), 1);
    assert!(!killed.exists());
    for kept in [just_killed, running, not_ours] {
        assert!(kept.join("reads.bin").exists(), "{}", kept.display());
    }
}

#[test]
fn requests_larger_than_the_scratch_file_grow_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut options = MeasureOptions::new(dir.path());
    options.file_bytes = 1 << 20;
    options.cell_seconds = 0.001;
    options.sizes = vec![4096, 4 << 20];
    options.depths = vec![1, 2];
    options.threads = 2;
    assert_eq!(options.scratch_bytes(), 4 << 20);
    let scratch = Scratch::new(dir.path()).unwrap();
    let file = scratch.fill(options.scratch_bytes()).unwrap();
    let table = measure_io(&file, &scratch.path, &options).unwrap();
    assert!(table.cold_measured.iter().flatten().all(|&rate| rate > 0.0));
}

#[test]
fn a_quick_profile_is_complete_and_sane() {
    let dir = tempfile::tempdir().unwrap();
    let mut options = MeasureOptions::new(dir.path());
    options.file_bytes = 8 << 20;
    options.cell_seconds = 0.002;
    options.sizes = vec![4096, 1 << 20];
    options.depths = vec![1, 4];
    options.threads = 2;
    options.codecs = vec![Compression::Zstd { level: 1 }];
    let data: Vec<u8> = (0..32 * 32 * 32)
        .flat_map(|i| ((i % 97) as f32).to_ne_bytes())
        .collect();
    let sample = Sample {
        shape: [32, 32, 32],
        dtype: DType::Float32,
        bytes: &data,
    };
    let mut steps = Vec::new();
    let profile = measure(&options, &sample, &mut |s| steps.push(s.to_string())).unwrap();
    assert!(steps.len() >= 4);
    let json = profile.to_json();
    let back = DeviceProfile::from_json(&json).unwrap();
    assert_eq!(back, profile);
    assert!(profile.memory.copy > 1e8 && profile.memory.crc > 1e8);
    assert!(profile.engine.call > 0.0 && profile.engine.task > 0.0);
    assert!((0.25..=1.0).contains(&profile.engine.parallel_efficiency));
    assert!(profile
        .engine
        .strided_element_dense
        .is_some_and(|c| c > 0.0));
    let zstd = profile.codec("zstd:1").unwrap();
    assert!(zstd.ratio > 2.0, "{zstd:?}"); // a repeating ramp compresses well
                                           // The scratch directory is gone.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}
