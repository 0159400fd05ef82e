//! Summaries of measurements (percentiles) and the plain-text tables every scenario prints.

use std::time::Duration;

use serde::Serialize;

/// Percentiles of a set of durations, in milliseconds.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Percentiles {
    /// How many samples.
    pub samples: usize,
    /// Smallest.
    pub min_ms: f64,
    /// Median.
    pub p50_ms: f64,
    /// 95th percentile.
    pub p95_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
    /// Largest.
    pub max_ms: f64,
    /// Arithmetic mean.
    pub mean_ms: f64,
}

/// The `q`-quantile (0..=1) of sorted `values` by the nearest-rank method: the smallest value
/// such that at least `q` of the samples are at or below it. `None` for no samples.
pub fn nearest_rank(sorted: &[f64], q: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (q.clamp(0.0, 1.0) * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

/// Percentiles of `samples` (any order).
pub fn percentiles(samples: &[Duration]) -> Percentiles {
    let mut ms: Vec<f64> = samples.iter().map(|d| d.as_secs_f64() * 1000.0).collect();
    ms.sort_by(f64::total_cmp);
    let at = |q| round(nearest_rank(&ms, q).unwrap_or_default(), 2);
    Percentiles {
        samples: ms.len(),
        min_ms: at(0.0),
        p50_ms: at(0.50),
        p95_ms: at(0.95),
        p99_ms: at(0.99),
        max_ms: at(1.0),
        mean_ms: if ms.is_empty() {
            0.0
        } else {
            round(ms.iter().sum::<f64>() / ms.len() as f64, 2)
        },
    }
}

/// Rounds to `digits` decimals, so reports do not show float noise.
pub fn round(value: f64, digits: i32) -> f64 {
    let factor = 10f64.powi(digits);
    (value * factor).round() / factor
}

/// A plain-text table: a header row and rows, columns padded to the widest cell.
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            if i < widths.len() {
                widths[i] = widths[i].max(cell.chars().count());
            } else {
                widths.push(cell.chars().count());
            }
        }
    }
    let line = |cells: Vec<&str>| {
        let padded: Vec<String> = cells
            .iter()
            .enumerate()
            .map(|(i, c)| format!("{c:<width$}", width = widths.get(i).copied().unwrap_or(0)))
            .collect();
        padded.join("  ").trim_end().to_owned()
    };
    let mut out = vec![line(header.to_vec())];
    out.push(
        widths
            .iter()
            .map(|w| "-".repeat(*w))
            .collect::<Vec<_>>()
            .join("  "),
    );
    for row in rows {
        out.push(line(row.iter().map(String::as_str).collect()));
    }
    out.join("\n")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn nearest_rank_follows_the_definition() {
        let values: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(nearest_rank(&values, 0.5), Some(50.0));
        assert_eq!(nearest_rank(&values, 0.99), Some(99.0));
        assert_eq!(nearest_rank(&values, 1.0), Some(100.0));
        assert_eq!(nearest_rank(&values, 0.0), Some(1.0));
        assert_eq!(nearest_rank(&[7.0], 0.99), Some(7.0));
        assert_eq!(nearest_rank(&[], 0.5), None);
        // 200 samples: p99 is the 198th value, so the two slowest runs do not count.
        let values: Vec<f64> = (1..=200).map(f64::from).collect();
        assert_eq!(nearest_rank(&values, 0.99), Some(198.0));
    }

    #[test]
    fn percentiles_of_unsorted_durations() {
        let samples: Vec<Duration> = [30, 10, 20, 40]
            .iter()
            .map(|ms| Duration::from_millis(*ms))
            .collect();
        let p = percentiles(&samples);
        assert_eq!(p.samples, 4);
        assert_eq!((p.min_ms, p.p50_ms, p.max_ms), (10.0, 20.0, 40.0));
        assert_eq!(p.p99_ms, 40.0);
        assert_eq!(p.mean_ms, 25.0);
        assert_eq!(percentiles(&[]), Percentiles::default());
    }

    #[test]
    fn tables_pad_columns() {
        let text = table(
            &["scenario", "result"],
            &[
                vec!["latency".to_owned(), "ok".to_owned()],
                vec!["x".to_owned(), "FAILED".to_owned()],
            ],
        );
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "scenario  result");
        assert_eq!(lines[1], "--------  ------");
        assert_eq!(lines[2], "latency   ok");
        assert_eq!(lines[3], "x         FAILED");
    }

    #[test]
    fn rounding() {
        assert_eq!(round(1.23456, 2), 1.23);
        assert_eq!(round(2.5, 0), 3.0);
    }
}
