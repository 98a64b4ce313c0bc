//! (grid)
