//! A small seeded random source: SplitMix64 and the normal (and, for the statistics'
//! simulations, gamma) variates built on it. Seeded, so that synthetic benchmark data and the
//! simulations repeat exactly.
//!
//! Why hand-written rather than `rand` (+ `rand_distr`): the one production user is the
//! benchmark's synthetic ring image (`bench/ring_image.rs`), whose bytes, and so the benchmark
//! numbers compared across commits, must not change when a dependency's generator or its
//! variate algorithms change between versions (`rand` documents that its `StdRng` and
//! distributions are not value-stable across releases). SplitMix64 is a dozen lines with
//! published constants, the normal and gamma variates are Marsaglia's textbook polar and
//! Marsaglia–Tsang methods, and keeping them here keeps two crates and their trees out of the
//! binary for what the tests and the benchmark need.

pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// SplitMix64 (Steele, Lea, Flood 2014).
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1) with 53 random bits.
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Standard normal (Marsaglia's polar method; the second variate is dropped for
    /// simplicity).
    pub fn normal(&mut self) -> f64 {
        loop {
            let u = 2.0 * self.uniform() - 1.0;
            let v = 2.0 * self.uniform() - 1.0;
            let s = u * u + v * v;
            if s > 0.0 && s < 1.0 {
                return u * (-2.0 * s.ln() / s).sqrt();
            }
        }
    }

    /// Gamma(shape, 1) for shape ≥ 1 (Marsaglia & Tsang 2000).
    #[cfg(test)]
    pub fn gamma(&mut self, shape: f64) -> f64 {
        let d = shape - 1.0 / 3.0;
        let c = 1.0 / (9.0 * d).sqrt();
        loop {
            let x = self.normal();
            let v = (1.0 + c * x).powi(3);
            if v <= 0.0 {
                continue;
            }
            let u = self.uniform();
            if u.ln() < 0.5 * x * x + d - d * v + d * v.ln() {
                return d * v;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mean_var(xs: &[f64]) -> (f64, f64) {
        let n = xs.len() as f64;
        let m = xs.iter().sum::<f64>() / n;
        (
            m,
            xs.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (n - 1.0),
        )
    }

    /// Moments of 200 000 draws against the distributions' own: a broken sampler misses these
    /// by far more than sampling noise (tolerances are several standard errors).
    #[test]
    fn variates_have_their_moments() {
        let mut r = Rng::new(7);
        let n = 200_000;
        let u: Vec<f64> = (0..n).map(|_| r.uniform()).collect();
        let (m, v) = mean_var(&u);
        assert!(
            (m - 0.5).abs() < 0.003 && (v - 1.0 / 12.0).abs() < 0.002,
            "{m} {v}"
        );
        let z: Vec<f64> = (0..n).map(|_| r.normal()).collect();
        let (m, v) = mean_var(&z);
        assert!(m.abs() < 0.01 && (v - 1.0).abs() < 0.015, "{m} {v}");
        let g: Vec<f64> = (0..n).map(|_| r.gamma(3.5)).collect();
        let (m, v) = mean_var(&g);
        assert!((m - 3.5).abs() < 0.03 && (v - 3.5).abs() < 0.08, "{m} {v}");
    }

    #[test]
    fn seeded_streams_repeat() {
        let a: Vec<u64> = {
            let mut r = Rng::new(42);
            (0..5).map(|_| r.next_u64()).collect()
        };
        let mut r = Rng::new(42);
        assert!(a.iter().all(|&x| x == r.next_u64()));
    }
}
