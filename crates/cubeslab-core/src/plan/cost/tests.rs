use super::*;
use crate::plan::{
    access::Access,
    profile::{EngineCosts, WorkingSet},
};
use crate::window::DimRange;

fn array(inner: [u64; 3], shard: [u64; 3]) -> StoredArray {
    StoredArray {
        shape: vec![600, 800, 1000],
        elem: 4,
        layout: Layout {
            inner: inner.to_vec(),
            shard: shard.to_vec(),
        },
        codec: ChunkCodec::Raw { crc: true },
    }
}

const SETUP: ReadSetup = ReadSetup {
    threads: 2,
    in_flight: 32,
    verify: true,
};

#[test]
fn counts_follow_the_layout() {
    let a = array([16, 16, 16], [128, 128, 256]);
    let p = DeviceProfile::typical();
    let inline = Access::Plane(0).window(&a.shape);
    let pred = predict(&a, &inline, &SETUP, Cache::Cold, &p);
    // 50 x 63 chunks of 16 KiB (+ crc), in 7 x 4 shards.
    assert_eq!(pred.chunks, 50 * 63);
    assert_eq!(pred.shards, 7 * 4);
    assert_eq!(pred.touched_bytes, 50 * 63 * (16384 + 4));
    assert_eq!(pred.output_bytes, 800 * 1000 * 4);
    // An inline's chunks sit in runs along the samples inside a shard:
    // one request per (shard, crossline chunk) and piece boundary at most.
    assert!(pred.requests <= 50 * 4 + 8, "{}", pred.requests);
    assert!(pred.device_bytes >= pred.touched_bytes);
    let warm = predict(&a, &inline, &SETUP, Cache::Warm, &p);
    assert!(warm.seconds < pred.seconds);
}

#[test]
fn time_is_monotone_in_work() {
    // Twice the chunk depth along the inline axis: twice the bytes to
    // check for an inline, so a slower verified warm read.
    let p = DeviceProfile::typical();
    let thin = array([8, 16, 16], [128, 128, 256]);
    let thick = array([16, 16, 16], [128, 128, 256]);
    let w = Access::Plane(0).window(&thin.shape);
    let t_thin = predict(&thin, &w, &SETUP, Cache::Warm, &p).seconds;
    let t_thick = predict(&thick, &w, &SETUP, Cache::Warm, &p).seconds;
    assert!(t_thick > 1.3 * t_thin, "{t_thin} {t_thick}");
    // Unverified raw reads only the selected span of each chunk.
    let setup = ReadSetup {
        verify: false,
        ..SETUP
    };
    let unverified = predict(&thick, &w, &setup, Cache::Cold, &p);
    // Per chunk: 16 rows of the selected crossline plane, from the first
    // element of the first row to the last of the last (15 * 16 + k
    // elements for k samples: 16, or 8 in the last chunk of 1000).
    assert_eq!(unverified.touched_bytes, 50 * (62 * 256 + 248) * 4);
    // More threads never predict slower.
    let one = ReadSetup {
        threads: 1,
        ..SETUP
    };
    assert!(
        predict(&thick, &w, &one, Cache::Warm, &p).seconds
            >= predict(&thick, &w, &SETUP, Cache::Warm, &p).seconds
    );
}

#[test]
fn a_shard_the_read_covers_is_read_whole_in_one_request() {
    let p = DeviceProfile::typical();
    let w = Access::Plane(0).window(&[600, 800, 1000]);
    // One inline per shard, in two chunks: the shard file is the request.
    let fitted = array([1, 400, 1000], [1, 800, 1000]);
    let one = predict(&fitted, &w, &SETUP, Cache::Cold, &p);
    assert_eq!((one.shards, one.requests), (1, 1));
    assert_eq!(one.device_bytes, 2 * (400 * 1000 * 4 + 4) + 2 * 16 + 4);
    // Four inlines per shard: the inline is a quarter of its shard, so
    // the index is read first and the chunks after it.
    let thick = array([1, 400, 1000], [4, 800, 1000]);
    let apart = predict(&thick, &w, &SETUP, Cache::Cold, &p);
    assert_eq!(apart.device_bytes, 2 * (400 * 1000 * 4 + 4));
    assert!(apart.seconds > one.seconds, "{apart:?} {one:?}");
}

#[test]
fn threads_speed_up_by_their_measured_efficiency() {
    let mut p = DeviceProfile::typical();
    p.engine.helper_arrival = 0.0;
    let a = array([16, 16, 16], [128, 128, 256]);
    let w = Access::Plane(2).window(&a.shape);
    let speedup = |p: &DeviceProfile, verify: bool| {
        let time = |threads| {
            let setup = ReadSetup {
                threads,
                verify,
                ..SETUP
            };
            // Helpers that arrive at once: the scaling alone.
            predict(&a, &w, &setup, Cache::Warm, p).seconds - p.engine.call
        };
        time(1) / time(2)
    };
    p.engine.parallel_efficiency = 1.0;
    assert!((speedup(&p, false) - 2.0).abs() < 1e-9);
    assert!((speedup(&p, true) - 2.0).abs() < 1e-9);
    // An unverified time slice through chunks 16 deep is engine steps
    // only (per chunk, run and strided element): they scale by the
    // efficiency. Checksums run at memory rates measured with every
    // thread busy, so a verified read scales better.
    p.engine.parallel_efficiency = 0.6;
    assert!(
        (speedup(&p, false) - 1.2).abs() < 1e-9,
        "{}",
        speedup(&p, false)
    );
    let verified = speedup(&p, true);
    assert!(verified > 1.3 && verified < 2.0, "{verified}");
    // A profile saved before the efficiency was measured reads as perfect scaling.
    let mut old = serde_json::to_value(&p).unwrap();
    old["engine"]
        .as_object_mut()
        .unwrap()
        .remove("parallel_efficiency");
    let old = DeviceProfile::from_json(&old.to_string()).unwrap();
    assert_eq!(old.engine.parallel_efficiency, 1.0);
}

#[test]
fn the_caller_works_alone_until_the_helpers_arrive() {
    let mut p = DeviceProfile::typical();
    let a = array([16, 16, 16], [128, 128, 256]);
    let w = Access::Plane(0).window(&a.shape);
    let time = |p: &DeviceProfile, threads| {
        let setup = ReadSetup { threads, ..SETUP };
        predict(&a, &w, &setup, Cache::Warm, p).seconds
    };
    // Helpers that come after the work is done leave it to the caller:
    // as on one thread (but for where the workers' runs would start).
    p.engine.helper_arrival = 1.0;
    let alone = time(&p, 2);
    let one_thread = time(&p, 1);
    assert!(
        (alone - one_thread).abs() < 1e-3 * one_thread,
        "{alone} {one_thread}"
    );
    p.engine.helper_arrival = 0.0;
    let at_once = time(&p, 2);
    assert!(at_once < 0.7 * alone, "{at_once} {alone}");
    // A helper arriving a quarter of the way through shares the rest.
    p.engine.helper_arrival = 0.25 * (alone - p.engine.call);
    let late = time(&p, 2);
    let expected = p.engine.helper_arrival + 0.75 * (at_once - p.engine.call) + p.engine.call;
    assert!((late - expected).abs() < 1e-12, "{late} {expected}");
}

/// CPU work of an unverified warm time slice through chunks 16 x 16 x `depth`.
fn time_slice_cpu(p: &DeviceProfile, depth: u64) -> f64 {
    let setup = ReadSetup {
        verify: false,
        ..SETUP
    };
    let a = array([16, 16, depth], [128, 128, 256]);
    let w = Access::Plane(2).window(&a.shape);
    predict(&a, &w, &setup, Cache::Warm, p).cpu_seconds
}

#[test]
fn runs_neighbouring_in_chunk_and_output_are_one_copy() {
    // A time slice through chunks one sample deep copies rows of
    // neighbours; through chunks 16 deep, every 16th element.
    let p = DeviceProfile::typical();
    let cpu = |depth| time_slice_cpu(&p, depth);
    let elements = 600.0 * 800.0;
    // Elements 64 bytes apart: a cache line each.
    let gap = elements * (p.engine.strided(64) - 4.0 / p.memory.copy);
    assert!(gap > 0.0);
    assert!(
        (cpu(16) - cpu(1) - gap).abs() < 0.01 * gap,
        "{} {}",
        cpu(1),
        cpu(16)
    );
}

#[test]
fn runs_of_checked_chunks_copy_at_the_rate_out_of_the_caches() {
    // Warm CPU time of `window` through `inner` chunks, checked, with
    // and without a rate for copies out of the caches.
    let extra = |inner: [u64; 3], window: &Window| {
        let mut p = DeviceProfile::typical();
        let a = array(inner, [128, 128, inner[2] * 12]);
        let with = predict(&a, window, &SETUP, Cache::Warm, &p).cpu_seconds;
        p.memory.copy_from_cache = None;
        predict(&a, window, &SETUP, Cache::Warm, &p).cpu_seconds - with
    };
    let p = DeviceProfile::typical();
    let per_byte = 1.0 / p.memory.copy - 1.0 / p.memory.copy_from_cache.unwrap();
    // A time slice through chunks one sample deep: rows of 16 neighbours.
    let slice = Access::Plane(2).window(&[600, 800, 1000]);
    let bytes = 600.0 * 800.0 * 4.0;
    let got = extra([16, 16, 1], &slice);
    assert!((got / (bytes * per_byte) - 1.0).abs() < 1e-9, "{got}");
    // 20 samples of every trace: 38 MB, too big an output to be reused.
    let slab = Window {
        dims: vec![
            DimRange::new(0, 600),
            DimRange::new(0, 800),
            DimRange::new(0, 20),
        ],
    };
    assert_eq!(extra([16, 16, 20], &slab), 0.0);
}

#[test]
fn elements_sharing_cache_lines_copy_faster() {
    let p = DeviceProfile::typical();
    let steps_of = |depth| time_slice_cpu(&p, depth);
    // The same elements, runs and chunks; 8-byte strides against 64-byte ones.
    let elements = 600.0 * 800.0;
    let dense = p.engine.strided_element_dense.unwrap();
    let expected = elements * (p.engine.strided_element - dense);
    let got = steps_of(16) - steps_of(2);
    assert!((got - expected).abs() < 0.01 * expected, "{got} {expected}");
    assert!((p.engine.strided(4) - dense).abs() < 1e-15);
    assert!((p.engine.strided(640) - p.engine.strided_element).abs() < 1e-15);
    let old = EngineCosts {
        strided_element_dense: None,
        ..p.engine.clone()
    };
    assert_eq!(old.strided(8), old.strided_element);
}

/// Working sets of `(MiB, chunk start)`, all checked at 20 GB/s.
fn sets(points: &[(u64, f64)]) -> Vec<WorkingSet> {
    points
        .iter()
        .map(|&(mib, chunk_start)| WorkingSet {
            bytes: mib << 20,
            crc: 20e9,
            chunk_start,
        })
        .collect()
}

#[test]
fn warm_checks_run_at_the_working_sets_rate_and_cold_ones_at_memorys() {
    let mut p = DeviceProfile::typical();
    let a = array([16, 16, 16], [16, 800, 1008]);
    // A time slice checks 1900 chunks of 16 KiB and a crc: 31 MB, between
    // working sets of 16 and 64 MiB checked at 40 and 10 GB/s.
    let w = Access::Plane(2).window(&a.shape);
    let checked = 1900.0 * 16388.0;
    p.memory.crc = 5e9;
    p.memory.crc_within = sets(&[(16, 0.0), (64, 0.0)]);
    p.memory.crc_within[0].crc = 40e9;
    p.memory.crc_within[1].crc = 10e9;
    // Halving every rate adds the checked bytes once more at that rate.
    let added = |p: &DeviceProfile, cache: Cache| {
        let mut slower = p.clone();
        slower.memory.crc /= 2.0;
        for s in &mut slower.memory.crc_within {
            s.crc /= 2.0;
        }
        predict(&a, &w, &SETUP, cache, &slower).cpu_seconds
            - predict(&a, &w, &SETUP, cache, p).cpu_seconds
    };
    let f = (checked / (16u64 << 20) as f64).ln() / 4f64.ln();
    let per_byte = 1.0 / 40e9 + (1.0 / 10e9 - 1.0 / 40e9) * f;
    let warm = added(&p, Cache::Warm);
    assert!((warm / (checked * per_byte) - 1.0).abs() < 1e-9, "{warm}");
    let cold = added(&p, Cache::Cold);
    assert!((cold / (checked / 5e9) - 1.0).abs() < 1e-9, "{cold}");
    // Without a curve, warm checks run at memory's rate too.
    p.memory.crc_within.clear();
    assert!((added(&p, Cache::Warm) / (checked / 5e9) - 1.0).abs() < 1e-9);
}

#[test]
fn a_checked_chunk_away_from_the_last_one_costs_a_start() {
    let mut p = DeviceProfile::typical();
    let a = array([16, 16, 16], [16, 800, 1008]);
    // Warm CPU time of `plane` over the profile without, and with, a
    // cost per chunk start: 1 us from memory (no curve measured).
    p.memory.crc_within.clear();
    let extra = |p: &mut DeviceProfile, plane: usize| {
        let w = Access::Plane(plane).window(&a.shape);
        let (start, curve) = (p.memory.crc_chunk_start, p.memory.crc_within.clone());
        p.memory.crc_chunk_start = 0.0;
        p.memory.crc_within = curve
            .iter()
            .map(|s| WorkingSet {
                chunk_start: 0.0,
                ..*s
            })
            .collect();
        let without = predict(&a, &w, &SETUP, Cache::Warm, p).cpu_seconds;
        (p.memory.crc_chunk_start, p.memory.crc_within) = (start, curve);
        predict(&a, &w, &SETUP, Cache::Warm, p).cpu_seconds - without
    };
    p.memory.crc_chunk_start = 1e-6;
    // An inline's 50 x 63 chunks lie end to end in one shard: a start
    // only where each of the 2 threads' 4 pieces begins.
    let inline = extra(&mut p, 0);
    assert!((inline - 8e-6).abs() < 1e-12, "{inline}");
    // A time slice takes every 63rd chunk of 38 shards: each is a start.
    let time = extra(&mut p, 2);
    assert!((time - 38.0 * 50.0 * 1e-6).abs() < 1e-12, "{time}");
    // Its 1900 chunks of 16 KiB and a crc (31 MB), repeated warm, start as fast as
    // the measured curve says at 31 MB: between its points at 16 and 64
    // MiB, log-linearly; past its end, as from memory. Cold, the chunks
    // always start in memory.
    p.memory.crc_within = sets(&[(1, 0.1e-6), (16, 0.2e-6), (64, 0.6e-6)]);
    let checked = 1900.0 * 16388.0 / (16u64 << 20) as f64;
    let at = 0.2e-6 + 0.4e-6 * checked.ln() / 4f64.ln();
    let warm = extra(&mut p, 2);
    assert!((warm - 1900.0 * at).abs() < 1e-12, "{warm} {at}");
    p.memory.crc_within = sets(&[(1, 0.1e-6), (16, 0.2e-6)]);
    assert!((extra(&mut p, 2) - time).abs() < 1e-12);
    let w = Access::Plane(2).window(&a.shape);
    let cold = |p: &mut DeviceProfile, start| {
        p.memory.crc_chunk_start = start;
        predict(&a, &w, &SETUP, Cache::Cold, p).cpu_seconds
    };
    let cold_extra = cold(&mut p, 1e-6) - cold(&mut p, 0.0);
    assert!((cold_extra - time).abs() < 1e-12, "{cold_extra}");
    p.memory.crc_chunk_start = 1e-6;
    // Unchecked, no chunk is streamed through whole.
    let setup = ReadSetup {
        verify: false,
        ..SETUP
    };
    let w = Access::Plane(2).window(&a.shape);
    let unchecked = predict(&a, &w, &setup, Cache::Warm, &p).cpu_seconds;
    p.memory.crc_chunk_start = 0.0;
    assert_eq!(
        unchecked,
        predict(&a, &w, &setup, Cache::Warm, &p).cpu_seconds
    );
}

#[test]
fn a_larger_chunk_costs_more_to_start_as_the_profile_measured() {
    use crate::plan::profile::ChunkStart;
    let mut p = DeviceProfile::typical();
    p.memory.crc_within.clear();
    p.memory.crc_chunk_start = 0.5e-6;
    let starts = |p: &DeviceProfile, inner: [u64; 3]| {
        // One chunk a shard: every chunk checked starts away from the last.
        let a = array(inner, inner);
        let w = Access::Plane(2).window(&a.shape);
        let mut none = p.clone();
        none.memory.crc_chunk_start = 0.0;
        let extra = predict(&a, &w, &SETUP, Cache::Warm, p).cpu_seconds
            - predict(&a, &w, &SETUP, Cache::Warm, &none).cpu_seconds;
        let chunks = predict(&a, &w, &SETUP, Cache::Warm, p).chunks as f64;
        extra / chunks
    };
    // Without sizes measured, every chunk's start costs the 8 KiB one's.
    let (small, large) = ([8, 8, 16], [16, 16, 64]);
    assert!((starts(&p, small) - 0.5e-6).abs() < 1e-15);
    assert!((starts(&p, large) - 0.5e-6).abs() < 1e-15);
    // Measured at 4 and 128 KiB: a 64 KiB chunk (and its crc) lies
    // between 8 and 128 KiB, log-linearly; past the sizes, the nearest.
    p.memory.crc_chunk_start_by_size = vec![
        ChunkStart {
            bytes: 4 << 10,
            seconds: 0.25e-6,
        },
        ChunkStart {
            bytes: 128 << 10,
            seconds: 2.5e-6,
        },
    ];
    let bytes: f64 = (16 * 16 * 64 * 4 + 4) as f64;
    let f = (bytes / 8192.0).ln() / 16f64.ln();
    let expected = 0.5e-6 + 2.0e-6 * f;
    let got = starts(&p, large);
    assert!((got - expected).abs() < 1e-12, "{got} {expected}");
    let huge = starts(&p, [64, 64, 64]);
    assert!((huge - 2.5e-6).abs() < 1e-12, "{huge}");
    // Profiles older than the sizes read as before.
    let old: MemoryRates = serde_json::from_value({
        let mut v = serde_json::to_value(&p.memory).unwrap();
        v.as_object_mut().unwrap().remove("crc_chunk_start_by_size");
        v
    })
    .unwrap();
    assert_eq!(old.chunk_start_scale(1 << 20), 1.0);
}

#[test]
fn elements_of_a_checked_chunk_are_gathered_from_cache() {
    let p = DeviceProfile::typical();
    let cached = p.engine.strided_element_cached.unwrap();
    let w = Access::Plane(2).window(&[600, 800, 1000]);
    let cpu = |a: &StoredArray, p: &DeviceProfile, verify: bool| {
        let setup = ReadSetup { verify, ..SETUP };
        predict(a, &w, &setup, Cache::Warm, p).cpu_seconds
    };
    // A time slice of 600 x 800 elements, each 64 bytes from the next.
    let small = array([16, 16, 16], [128, 128, 256]);
    let without = EngineCosts {
        strided_element_cached: None,
        ..p.engine.clone()
    };
    let old = DeviceProfile {
        engine: without,
        ..p.clone()
    };
    let saved = cpu(&small, &old, true) - cpu(&small, &p, true);
    let expected = 600.0 * 800.0 * (p.engine.strided(64) - cached);
    assert!(
        (saved - expected).abs() < 1e-3 * expected,
        "{saved} {expected}"
    );
    // Unchecked, the copy meets the chunk in memory.
    assert_eq!(cpu(&small, &old, false), cpu(&small, &p, false));
    // A chunk too big to stay in the caches: as before.
    let big = array([128, 128, 32], [128, 128, 256]);
    assert!(big.layout.inner.iter().product::<u64>() * 4 > CACHED_CHUNK_BYTES);
    assert_eq!(cpu(&big, &old, true), cpu(&big, &p, true));
}

#[test]
fn elements_written_across_the_outputs_rows_pay_for_new_pages() {
    let p = DeviceProfile::typical();
    let extra = p.engine.scattered_store.unwrap();
    let old = DeviceProfile {
        engine: EngineCosts {
            scattered_store: None,
            ..p.engine.clone()
        },
        ..p.clone()
    };
    let time_slice = Access::Plane(2).window(&[600, 800, 1000]);
    let added = |a: &StoredArray| {
        predict(a, &time_slice, &SETUP, Cache::Warm, &p).cpu_seconds
            - predict(a, &time_slice, &SETUP, Cache::Warm, &old).cpu_seconds
    };
    // Chunks one crossline wide: each chunk's run goes down the output's
    // rows, 800 elements (3200 bytes) apart, so 3200/4096 of a page
    // per element, for all 600 x 800 of them.
    let thin = array([64, 1, 16], [128, 64, 256]);
    let expected = 600.0 * 800.0 * extra * 3200.0 / 4096.0;
    assert!(
        (added(&thin) - expected).abs() < 1e-6 * expected,
        "{} {expected}",
        added(&thin)
    );
    // Chunks wider than one crossline write along the output's rows.
    assert_eq!(added(&array([16, 16, 16], [128, 128, 256])), 0.0);
}

#[test]
fn compressed_chunks_move_fewer_bytes() {
    let p = DeviceProfile::typical();
    let mut a = array([16, 16, 16], [128, 128, 256]);
    let w = Access::Plane(2).window(&a.shape);
    let raw = predict(&a, &w, &SETUP, Cache::Cold, &p);
    a.codec = ChunkCodec::Compressed {
        ratio: 4.0,
        decode: 1e9,
        crc: true,
    };
    let packed = predict(&a, &w, &SETUP, Cache::Cold, &p);
    assert!(packed.touched_bytes * 3 < raw.touched_bytes);
    assert!(packed.cpu_seconds > raw.cpu_seconds);
}
