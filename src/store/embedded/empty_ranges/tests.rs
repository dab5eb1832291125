//! Tests of [`super::EmptyRanges`].

use super::*;

#[test]
fn forward_and_reverse_skip_respect_read_version() {
    let mut empty = EmptyRanges::default();
    empty.record(b"a", b"m", 10, 0);
    assert_eq!(empty.skip_forward(b"a", b"z", 10), b"m");
    assert_eq!(
        empty.skip_forward(b"a", b"z", 9),
        b"a",
        "older readers may see keys there"
    );
    assert_eq!(empty.skip_reverse(b"a", b"m", 12), b"a");
    assert_eq!(empty.skip_reverse(b"a", b"z", 12), b"z");
}

#[test]
fn writes_split_and_overlaps_keep_the_older_age() {
    let mut empty = EmptyRanges::default();
    empty.record(b"a", b"m", 10, 0);
    empty.split_at(b"f");
    assert_eq!(empty.skip_forward(b"a", b"z", 10), b"f");
    assert_eq!(empty.skip_forward(b"f\0", b"z", 10), b"m");
    empty.record(b"c", b"x", 20, 0);
    // [c, f) and [f\0, m) were empty since 10 already; the written key f
    // and [m, x) only since 20.
    assert_eq!(empty.skip_forward(b"f\0", b"z", 15), b"m");
    assert_eq!(empty.skip_forward(b"f\0", b"z", 20), b"x");
    assert_eq!(empty.skip_reverse(b"a", b"x", 20), b"a");
    assert_eq!(empty.skip_reverse(b"a", b"x", 15), b"x");
    assert_eq!(empty.skip_reverse(b"a", b"m", 15), b"f\0");
}

#[test]
fn a_drained_head_stays_one_stretch() {
    let mut empty = EmptyRanges::default();
    let keys: Vec<Vec<u8>> = (1u16..1000).map(|i| i.to_be_bytes().to_vec()).collect();
    // Each pop at version v sees [begin, next head) empty; it is the only reader.
    for (version, head) in keys.iter().enumerate() {
        let from = if version == 0 {
            vec![0]
        } else {
            keys[version - 1].clone()
        };
        empty.record(&from, head, version as u64, version as u64);
    }
    assert_eq!(empty.len(), 1);
    assert_eq!(empty.skip_forward(&[0], &[0xff], 998), keys[998]);
}

#[test]
fn a_head_drained_beside_an_older_reader_becomes_one_stretch_once_it_ends() {
    let mut empty = EmptyRanges::default();
    let keys: Vec<Vec<u8>> = (1u16..1000).map(|i| i.to_be_bytes().to_vec()).collect();
    // As a fulfiller while settles commit: a transaction one version older
    // is always live, so no record can merge when it is made.
    for (version, head) in keys.iter().enumerate() {
        let from = if version == 0 {
            vec![0]
        } else {
            keys[version - 1].clone()
        };
        let version = version as u64 + 1;
        empty.record(&from, head, version, version - 1);
    }
    assert!(
        empty.len() > 900,
        "nothing merged while older readers lived"
    );
    empty.merge_deferred(500);
    assert!(empty.len() < 600, "records older than the horizon merged");
    empty.merge_deferred(1000);
    assert_eq!(empty.len(), 1, "every record merged once the readers ended");
    assert_eq!(empty.skip_forward(&[0], &[0xff], 999), keys[998]);
    // A reader older than the merged age skips nothing: slower, never wrong.
    assert_eq!(empty.skip_forward(&[0], &[0xff], 998), vec![0]);
}

#[test]
fn coalesce_merges_only_past_the_horizon() {
    let mut empty = EmptyRanges::default();
    let keys: Vec<Vec<u8>> = (0u16..200).map(|i| i.to_be_bytes().to_vec()).collect();
    for (version, pair) in keys.windows(2).enumerate() {
        empty.record(&pair[0], &pair[1], version as u64, 0);
    }
    empty.coalesce(100);
    assert!(empty.len() < 150, "stretches older than the horizon merge");
    assert_eq!(empty.skip_forward(&keys[0], &keys[199], 100), keys[101]);
    // One hop over the merged stretch, then one per younger stretch.
    assert_eq!(empty.skip_forward(&keys[0], &keys[199], 500), keys[199]);
}

/// The skips as first written: one map lookup per hop.
fn skip_forward_by_lookups(
    empty: &EmptyRanges,
    begin: &[u8],
    end: &[u8],
    read_version: u64,
) -> Vec<u8> {
    let mut position = begin.to_vec();
    for _ in 0..HOPS_MAX {
        if position.as_slice() >= end {
            break;
        }
        let covering = empty
            .stretches
            .range::<[u8], _>((Bound::Unbounded, Bound::Included(position.as_slice())))
            .next_back();
        match covering {
            Some((_, stretch)) if stretch.end > position && stretch.since <= read_version => {
                position = stretch.end.clone();
            }
            _ => break,
        }
    }
    position.min(end.to_vec())
}

fn skip_reverse_by_lookups(
    empty: &EmptyRanges,
    begin: &[u8],
    end: &[u8],
    read_version: u64,
) -> Vec<u8> {
    let mut position = end.to_vec();
    for _ in 0..HOPS_MAX {
        if position.as_slice() <= begin {
            break;
        }
        let covering = empty
            .stretches
            .range::<[u8], _>((Bound::Unbounded, Bound::Excluded(position.as_slice())))
            .next_back();
        match covering {
            Some((start, stretch)) if stretch.end >= position && stretch.since <= read_version => {
                position = start.clone();
            }
            _ => break,
        }
    }
    position.max(begin.to_vec())
}

#[test]
fn walking_skips_agree_with_one_lookup_per_hop() {
    use rand::Rng;
    let mut rng = rand::rng();
    let key = |rng: &mut rand::rngs::ThreadRng| vec![rng.random_range(0u8..64)];
    for _ in 0..200 {
        let mut empty = EmptyRanges::default();
        for _ in 0..rng.random_range(0..40) {
            if rng.random_bool(0.8) {
                let (a, b) = (key(&mut rng), key(&mut rng));
                let since = rng.random_range(0..20);
                let horizon = rng.random_range(0..20);
                let (low, high) = if a <= b { (a, b) } else { (b, a) };
                empty.record(&low, &high, since, horizon);
            } else {
                empty.split_at(&key(&mut rng));
            }
        }
        for _ in 0..50 {
            let (begin, end) = (key(&mut rng), key(&mut rng));
            let version = rng.random_range(0..25);
            assert_eq!(
                empty.skip_forward(&begin, &end, version),
                skip_forward_by_lookups(&empty, &begin, &end, version),
                "forward {begin:?}..{end:?} at {version} over {:?}",
                empty.stretches
            );
            assert_eq!(
                empty.skip_reverse(&begin, &end, version),
                skip_reverse_by_lookups(&empty, &begin, &end, version),
                "reverse {begin:?}..{end:?} at {version} over {:?}",
                empty.stretches
            );
        }
    }
}

/// The gaps a scan reads, in scan order, as the scan walks them.
fn gaps(
    empty: &EmptyRanges,
    begin: &[u8],
    end: &[u8],
    version: u64,
    reverse: bool,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut gaps = Vec::new();
    let mut position = if reverse {
        end.to_vec()
    } else {
        begin.to_vec()
    };
    for _ in 0..1_000 {
        let finished = if reverse {
            position.as_slice() <= begin
        } else {
            position.as_slice() >= end
        };
        if finished {
            return gaps;
        }
        let (gap_begin, gap_end) = if reverse {
            empty.gap_reverse(begin, &position, version)
        } else {
            empty.gap_forward(&position, end, version)
        };
        assert!(gap_begin <= gap_end);
        assert!(
            begin <= gap_begin.as_slice() && gap_end.as_slice() <= end,
            "gaps stay in range"
        );
        if reverse {
            assert!(gap_end <= position, "a reverse scan only moves down");
            position = gap_begin.clone();
        } else {
            assert!(gap_begin >= position, "a forward scan only moves up");
            position = gap_end.clone();
        }
        if gap_begin < gap_end {
            gaps.push((gap_begin, gap_end));
        }
    }
    panic!("the gap walk of {begin:?}..{end:?} did not end");
}

#[test]
fn gaps_leave_out_only_what_the_reader_may_skip() {
    use rand::Rng;
    let mut rng = rand::rng();
    let key = |rng: &mut rand::rngs::ThreadRng| vec![rng.random_range(0u8..32)];
    // Every boundary a stretch can have here: single bytes and the key after each.
    let candidates: Vec<Vec<u8>> = (0u8..33).flat_map(|b| [vec![b], vec![b, 0]]).collect();
    for _ in 0..300 {
        let mut empty = EmptyRanges::default();
        for _ in 0..rng.random_range(0..30) {
            if rng.random_bool(0.7) {
                let (a, b) = (key(&mut rng), key(&mut rng));
                let (low, high) = if a <= b { (a, b) } else { (b, a) };
                empty.record(
                    &low,
                    &high,
                    rng.random_range(0..20),
                    rng.random_range(0..20),
                );
            } else {
                empty.split_at(&key(&mut rng));
            }
        }
        for _ in 0..30 {
            let (a, b) = (key(&mut rng), key(&mut rng));
            let (begin, end) = if a <= b { (a, b) } else { (b, a) };
            let version = rng.random_range(0..25);
            for reverse in [false, true] {
                let read = gaps(&empty, &begin, &end, version, reverse);
                for candidate in candidates.iter().filter(|c| begin <= **c && **c < end) {
                    let in_gap = read.iter().any(|(b, e)| b <= candidate && candidate < e);
                    let skippable = empty.stretches.iter().any(|(start, stretch)| {
                        start <= candidate && *candidate < stretch.end && stretch.since <= version
                    });
                    assert!(
                        in_gap || skippable,
                        "{candidate:?} in {begin:?}..{end:?} at {version} (reverse: {reverse}) was \
                         neither read nor skippable; gaps {read:?} over {:?}",
                        empty.stretches
                    );
                }
            }
        }
    }
}

#[test]
fn a_cleared_write_inside_a_stretch_is_read_once_then_skipped() {
    let mut empty = EmptyRanges::default();
    empty.record(b"a", b"z", 5, 5);
    // A write at m splits the stretch; m is cleared again later.
    empty.split_at(b"m");
    assert_eq!(
        empty.gap_forward(b"a", b"z", 10),
        (b"m".to_vec(), b"m\0".to_vec())
    );
    assert_eq!(
        empty.gap_reverse(b"a", b"z", 10),
        (b"m".to_vec(), b"m\0".to_vec())
    );
    // The reader that saw the hole empty reports it, and the stretch is whole again.
    empty.record(b"m", b"m\0", 10, 10);
    assert_eq!(empty.len(), 1);
    assert_eq!(
        empty.gap_forward(b"a", b"z", 10),
        (b"z".to_vec(), b"z".to_vec())
    );
    assert_eq!(
        empty.gap_reverse(b"a", b"z", 10),
        (b"a".to_vec(), b"a".to_vec())
    );
    // A reader older than the hole's report still reads it.
    assert_eq!(
        empty.gap_forward(b"a", b"z", 7),
        (b"a".to_vec(), b"z".to_vec())
    );
}
