use super::*;

#[test]
fn interpolation_hits_table_points_and_stays_between_them() {
    let p = DeviceProfile::typical();
    let t = &p.io;
    for (i, &s) in t.sizes.iter().enumerate() {
        for (j, &d) in t.depths.iter().enumerate() {
            let r = t.cold_rate(s as f64, d as f64);
            assert!((r / t.cold[i][j] - 1.0).abs() < 1e-9);
        }
    }
    let mid = t.cold_rate(8192.0, 3.0);
    let lo = t.cold[0][1].min(t.cold[1][2]);
    let hi = t.cold[0][1].max(t.cold[1][2]);
    assert!(mid >= lo * 0.999 && mid <= hi * 1.001, "{lo} {mid} {hi}");
    let envelope = IoTable::envelope(&[vec![1.0, 3.0, 2.0], vec![2.0, 1.0, 5.0]]);
    assert_eq!(envelope, vec![vec![1.0, 3.0, 3.0], vec![2.0, 3.0, 5.0]]);
    // Clamped beyond the edges.
    assert!((t.cold_rate(1.0, 0.5) / t.cold[0][0] - 1.0).abs() < 1e-9);
    let json = p.to_json();
    assert_eq!(DeviceProfile::from_json(&json).unwrap(), p);
    assert!(DeviceProfile::from_json("{}").is_err());
}

/// A curve of two working sets, 1 and 4 MiB.
fn two_sets(crc: [f64; 2], chunk_start: [f64; 2]) -> Vec<WorkingSet> {
    vec![
        WorkingSet {
            bytes: 1 << 20,
            crc: crc[0],
            chunk_start: chunk_start[0],
        },
        WorkingSet {
            bytes: 4 << 20,
            crc: crc[1],
            chunk_start: chunk_start[1],
        },
    ]
}

#[test]
fn checks_within_few_bytes_cost_the_curve_and_past_it_memory() {
    let mut m = DeviceProfile::typical().memory;
    m.crc = 10e9;
    m.crc_chunk_start = 1e-6;
    m.crc_within = two_sets([40e9, 20e9], [0.1e-6, 0.3e-6]);
    // Below the first point: the first point; between: log-linear, so
    // 2 MiB lies halfway from 1 to 4 MiB (in seconds per byte for the
    // rate); past the last: memory's.
    assert_eq!(m.chunk_start_within(4096), 0.1e-6);
    assert_eq!(m.crc_within(4096), 40e9);
    assert!((m.chunk_start_within(2 << 20) - 0.2e-6).abs() < 1e-15);
    let halfway = 2.0 / (1.0 / 40e9 + 1.0 / 20e9);
    assert!((m.crc_within(2 << 20) / halfway - 1.0).abs() < 1e-12);
    assert_eq!(m.chunk_start_within(4 << 20), 0.3e-6);
    assert!((m.crc_within(4 << 20) / 20e9 - 1.0).abs() < 1e-12);
    assert_eq!(m.chunk_start_within((4 << 20) + 1), 1e-6);
    assert_eq!(m.crc_within((4 << 20) + 1), 10e9);
    // Without a curve: memory's for any size.
    m.crc_within.clear();
    assert_eq!(m.chunk_start_within(4096), 1e-6);
    assert_eq!(m.crc_within(4096), 10e9);
}

#[test]
fn cpu_samples_combine_field_by_field_into_medians() {
    let typical = DeviceProfile::typical();
    // Three samples, each field's middle value in a different sample.
    let scaled = |copy: f64, crc: f64, task: f64, dense: Option<f64>| {
        let mut m = typical.memory.clone();
        m.copy *= copy;
        m.crc *= crc;
        let mut e = typical.engine.clone();
        e.task *= task;
        e.strided_element_dense = dense;
        e.strided_element_cached = dense.map(|d| d * 2.0);
        e.scattered_store = dense.map(|d| d * 4.0);
        m.crc_chunk_start = crc;
        m.copy_from_cache = dense.map(|d| d * 3.0);
        m.crc_within = two_sets([copy, task], [task, copy]);
        (m, e)
    };
    let samples = [
        scaled(1.0, 3.0, 2.0, Some(5.0)),
        scaled(2.0, 1.0, 3.0, None),
        scaled(3.0, 2.0, 1.0, Some(1.0)),
    ];
    let memory: Vec<MemoryRates> = samples.iter().map(|s| s.0.clone()).collect();
    let engine: Vec<EngineCosts> = samples.iter().map(|s| s.1.clone()).collect();
    let m = MemoryRates::median(&memory);
    assert_eq!(m.copy, typical.memory.copy * 2.0);
    assert_eq!(m.crc, typical.memory.crc * 2.0);
    assert_eq!(m.fault, typical.memory.fault);
    let e = EngineCosts::median(&engine);
    assert_eq!(e.task, typical.engine.task * 2.0);
    assert_eq!(e.call, typical.engine.call);
    // Of the samples that have it: the upper of the two middle values.
    assert_eq!(e.strided_element_dense, Some(5.0));
    assert_eq!(e.strided_element_cached, Some(10.0));
    assert_eq!(e.scattered_store, Some(20.0));
    assert_eq!(m.crc_chunk_start, 2.0);
    assert_eq!(m.copy_from_cache, Some(15.0));
    assert_eq!(m.crc_within, two_sets([2.0, 2.0], [2.0, 2.0]));
    let none: Vec<EngineCosts> = vec![samples[1].1.clone()];
    assert_eq!(EngineCosts::median(&none).strided_element_dense, None);
    assert_eq!(EngineCosts::median(&none).strided_element_cached, None);
    assert_eq!(EngineCosts::median(&none).scattered_store, None);
}
