//! Generates the canbench functions from the grid: one `#[bench(raw)]` query per cell of
//! `cells_of(Canister::Vfs)`, with the `canbench` feature only (`benches.rs` includes them).

fn main() {
    stablebench_grid::canbench::write(stablebench_grid::cells::Canister::Vfs);
}
