//! Helpers shared by the native tests.
// Each test binary compiles this module and uses part of it.
#![allow(dead_code)]

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use stablebench::Meter;

/// A meter that runs out after `n` checks, then again after `n` more once reset (one "message"
/// each): the budget of a job, counted in checks instead of instructions.
#[derive(Clone)]
pub struct Checks(Arc<AtomicU32>, u32);

impl Checks {
    /// Runs out after `n` checks.
    pub fn new(n: u32) -> Checks {
        Checks(Default::default(), n)
    }

    /// A new message: `n` more checks.
    pub fn reset(&self) {
        self.0.store(0, Ordering::Relaxed);
    }

    /// [`Checks::reset`], for a call's argument.
    pub fn call(&self) -> &Self {
        self.reset();
        self
    }
}

impl Meter for Checks {
    fn exhausted(&self) -> bool {
        self.0.fetch_add(1, Ordering::Relaxed) + 1 > self.1
    }
    fn budget(&self) -> u64 {
        u64::from(self.1)
    }
}
