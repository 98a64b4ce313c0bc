//! The ic-rusqlite users/orders reference benchmark: one step (`Bench`) per cell, on an empty
//! database with the cell's profile, after the step's setup; the oracle checks what it returned.

use stablebench::bench::{Bench, BenchRun, SetupStepRun, Sizes};
use stablebench::NoLimit;
use stablebench_grid::cells::{Cell, Op};

use super::LiveStep;
use crate::env::Env;
use crate::{fail, setup_stage, verdict, Measured};

fn step_of(cell: &Cell) -> Result<Bench, String> {
    match cell.op {
        Op::UsersOrders(bench) => Ok(bench),
        _ => Err(format!("{} is not a users/orders cell", cell.name())),
    }
}

/// A fresh, empty database with the cell's profile, the setup stage by stage (each stage one
/// write: a setup step on ic-rusqlite, the whole setup on ic-sqlite-vfs, see
/// `Stage::users_orders_steps`), then the measured step of the cell the last stage went on as.
pub fn bench<E: Env>(env: &E, grid: &[Cell], index: usize, first: Cell) -> (Cell, Measured) {
    let profile = first.profile.unwrap_or_else(|| fail(&first.name(), "open", "a users/orders cell has a profile"));
    env.open_sqlite(&profile).unwrap_or_else(|e| fail(&first.name(), "open", e));
    // The cell this query measures, and its position: `first` until a setup stage says otherwise.
    let mut now = (index, first);
    let mut stage = 0;
    while stage < now.1.setup_stage_count() {
        let (cell, steps) = (now.1, now.1.setup_stage(stage).users_orders_steps());
        env.write(|conn| steps.iter().try_for_each(|step| step.run(conn, cell.sizes(), 0, &NoLimit).map(drop)))
            .unwrap_or_else(|e| fail(&cell.name(), "setup", e));
        now = setup_stage(grid, now.0, cell.setup_stage(stage));
        stage += 1;
    }
    (now.1, measure(env, &now.1))
}

/// The cell's step on the open database, which its setup built at the cell's sizes, then the
/// oracle's check (outside the measure).
pub fn measure<E: Env>(env: &E, cell: &Cell) -> Measured {
    let (bench, sizes) = (step_of(cell)?, cell.sizes());
    let (result, output) = env.measured_write(|conn| bench.run(conn, sizes));
    let output = output.map_err(|e| e.to_string())?;
    let checked =
        env.read(|conn| bench.verify(conn, sizes, &output)).map(|o| format!("{o:?}")).map_err(|e| e.to_string());
    env.replied(output);
    Ok((result, verdict(checked)))
}

/// The setup steps, one live step each.
pub fn live_setup(cell: &Cell) -> Vec<LiveStep> {
    step_of(cell).map(|b| b.setup_steps().iter().map(|&s| LiveStep::UsersOrders(s)).collect()).unwrap_or_default()
}

/// Past the reference size, the setup's index build and the 10x inserts each exceed one update.
pub fn live_refusal(cell: &Cell) -> Option<String> {
    (cell.size > Sizes::REFERENCE.orders).then(|| {
        format!(
            "{}: users/orders cells run live up to the reference size ({} orders): past it the index build of the \
             setup and the 10x inserts each exceed one 40 B update; canbench runs every size",
            cell.name(),
            Sizes::REFERENCE.orders
        )
    })
}
