//! Inline and crossline numbers that do not belong to the survey: a few
//! traces whose headers hold garbage would otherwise add whole rows and
//! columns of empty cells to the grid, silently.
//!
//! A value is an outlier when few traces carry it (at most a tenth of the
//! median count per value) and it lies off the survey's lattice: not on the
//! step of the well-populated values, or farther beyond their range than
//! the range is wide (a short line at the survey's edge is neither).

/// A key value few traces carry, off the lattice of the others.
#[derive(Debug, Clone, PartialEq)]
pub struct Outlier {
    /// The value (an inline or crossline number).
    pub value: i64,
    /// Traces (0-based, file order) that carry it.
    pub traces: Vec<u64>,
    /// Whether it lies beyond the survey's range by more than the range is
    /// wide, as damaged headers do; one between the lines (an infill line
    /// of a decimated survey) is plausible.
    pub far: bool,
}

/// The outliers among `keys` (one value per trace), given the sorted
/// distinct values.
pub fn find(keys: impl Iterator<Item = i64> + Clone, distinct: &[i64]) -> Vec<Outlier> {
    if distinct.len() < 3 {
        return Vec::new();
    }
    let mut counts = vec![0u64; distinct.len()];
    for v in keys.clone() {
        counts[distinct.binary_search(&v).expect("a distinct value")] += 1;
    }
    let mut sorted = counts.clone();
    sorted.sort_unstable();
    let thin = (sorted[sorted.len() / 2] / 10).max(1);
    let populated: Vec<i64> = distinct
        .iter()
        .zip(&counts)
        .filter(|(_, &c)| c > thin)
        .map(|(&v, _)| v)
        .collect();
    if populated.len() < 2 {
        return Vec::new();
    }
    let step = populated
        .windows(2)
        .map(|w| w[1] - w[0])
        .fold(0i64, gcd)
        .max(1);
    let (low, high) = (populated[0], populated[populated.len() - 1]);
    let extent = high - low;
    let far = |v: i64| v < low.saturating_sub(extent) || v > high.saturating_add(extent);
    let off_lattice = |v: i64| (v - low) % step != 0 || far(v);
    let mut outliers: Vec<Outlier> = distinct
        .iter()
        .zip(&counts)
        .filter(|(&v, &c)| c <= thin && off_lattice(v))
        .map(|(&value, _)| Outlier {
            value,
            traces: Vec::new(),
            far: far(value),
        })
        .collect();
    if outliers.is_empty() {
        return outliers;
    }
    for (i, v) in keys.enumerate() {
        if let Ok(k) = outliers.binary_search_by_key(&v, |o| o.value) {
            outliers[k].traces.push(i as u64);
        }
    }
    outliers
}

fn gcd(a: i64, b: i64) -> i64 {
    if b == 0 {
        a.abs()
    } else {
        gcd(b, a % b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`find`] on `keys` (one per trace), with their distinct values.
    fn find_in(keys: &[i64]) -> Vec<Outlier> {
        let mut distinct = keys.to_vec();
        distinct.sort_unstable();
        distinct.dedup();
        find(keys.iter().copied(), &distinct)
    }

    #[test]
    fn garbage_values_carried_by_a_few_traces_are_found_with_their_traces() {
        // 20 inlines 100, 102, ..., 138 of 50 traces each, and two garbage traces.
        let mut keys: Vec<i64> = (0..1000).map(|i| 100 + 2 * (i / 50)).collect();
        keys[7] = -2_100_000_000;
        keys[500] = 861_234_567;
        let found = find_in(&keys);
        assert_eq!(
            found,
            vec![
                Outlier {
                    value: -2_100_000_000,
                    traces: vec![7],
                    far: true,
                },
                Outlier {
                    value: 861_234_567,
                    traces: vec![500],
                    far: true,
                },
            ]
        );
    }

    #[test]
    fn a_line_between_the_lines_of_a_decimated_survey_is_found_but_not_far() {
        let mut keys: Vec<i64> = (0..1000).map(|i| 100 + 2 * (i / 50)).collect();
        keys.push(117);
        let found = find_in(&keys);
        assert_eq!(
            found,
            vec![Outlier {
                value: 117,
                traces: vec![1000],
                far: false,
            }]
        );
    }

    #[test]
    fn a_regular_survey_with_a_short_edge_line_has_no_outliers() {
        // The last inline holds only 3 traces, but it lies on the lattice.
        let mut keys: Vec<i64> = (0..1000).map(|i| 100 + 2 * (i / 50)).collect();
        keys.extend([140, 140, 140]);
        assert!(find_in(&keys).is_empty());
    }
}
