//! bloomflow: Bloom filters over very large data, built and used to prune joins as a distributed
//! dataflow job on timely-dataflow.
//!
//! The library holds the filter ([`filter::BloomFilter`], [`counting::CountingBloomFilter`],
//! Hadoop's [`dynamic::DynamicBloomFilter`]), its hashing and sizing, the file formats, and the
//! pieces of the distributed jobs.

pub mod atomic;
pub mod bits;
pub mod bytemask;
pub mod counting;
pub mod dynamic;
pub mod error;
pub mod filter;
pub mod format;
pub mod hashing;
pub mod limits;
pub mod params;
pub mod shared_filter;
pub mod query_filter;
pub mod spec;

pub use counting::CountingBloomFilter;
pub use dynamic::DynamicBloomFilter;
pub use error::{Error, Result};
pub use filter::BloomFilter;
pub use format::StoredFilter;
pub use query_filter::QueryFilter;
pub use spec::{FilterSpec, Layout};
pub mod records;
pub mod splits;
pub mod globs;
pub mod compressed;
pub mod bzip2_blocks;
pub mod hadoop_blocks;
pub mod allreduce;
pub mod cluster;
pub mod scan;
pub mod jobs;
pub mod report;
pub mod gen;
pub mod output;
pub mod cleanup;
pub mod keyset;
pub mod messages;
#[cfg(test)]
mod xorshift;
