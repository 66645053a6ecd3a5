//! bloomflow's integration tests: one test binary, a module per area.

mod util;

mod bad_input;
mod build_job;
mod cli_filter;
mod cluster_faults;
mod filter_props;
mod format_native;
mod compression;
mod counting;
mod interop;
mod keyset_props;
mod semijoin_job;
