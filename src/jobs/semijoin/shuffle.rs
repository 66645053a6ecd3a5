//! The exact shuffle join's probe on one worker: the Bloom step, then each survivor's key sent
//! into the shard join ([`shard_join`](crate::jobs::shard_join)), round by round, and the
//! rounds written once the join has answered for them, to the worker's part file or, for a split
//! it took from another worker, to that split's scratch file.

use super::{part_after_probe, survivor_wire_bytes, Job, Part, ProbeReport, Stealing};
use crate::error::Result;
use crate::query_filter::QueryFilter;
use crate::jobs::join_key::JoinKey;
use crate::jobs::rounds::{RoundClock, Sinks, Tick, WaitingRecords, LAG};
use crate::jobs::shard_join::{ShardJoin, Survivor};
use crate::jobs::steal::ProbeClaims;
use crate::jobs::PARK;
use crate::output::TaskFile;
use crate::scan::{RecordBatch, ScanStats};
use std::cell::RefCell;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use timely::dataflow::operators::probe::Handle as ProbeHandle;
use timely::dataflow::operators::vec::input::Handle;
use timely::worker::Worker;

impl Job {
    /// The Bloom step, then the exact join of the survivors' keys with the build keys. Only
    /// (key, worker, number) tuples and build keys are exchanged; the survivors wait in memory,
    /// round by round ([`WaitingRecords`]), and each worker writes those that matched, in input
    /// order. With `--anti` every record waits, and the worker writes all but the survivors that
    /// matched. Splits are claimed and taken as in the Bloom step ([`probe_splits`](Self::probe_splits)).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn probe_exact(
        &self,
        worker: &mut Worker,
        join: ShardJoin,
        filter: &QueryFilter,
        abort: &AtomicBool,
        counter: &AtomicU64,
        report: &mut ProbeReport,
        stealing: &mut Stealing,
    ) -> Result<Part> {
        // The build keys are all sent by now (the build input is closed).
        let ShardJoin { build: _, survivors: mut survivors_in, matched, answered } = join;
        survivors_in.advance_to(1);

        let me = worker.index();
        let out = ShufflePart::new(self, me, abort);
        let mut probe = ShuffleProbe { job: self, worker, filter, survivors_in, answered: &answered, matched: &matched, out, clock: RoundClock::default(), answers: Vec::new(), survivors: 0, pruned_bytes: 0 };
        let scanned = probe.read_splits(counter, stealing);
        let ShuffleProbe { worker, survivors_in, mut out, survivors, pruned_bytes, .. } = probe;
        drop(survivors_in);
        worker.step_or_park_while(PARK, || !answered.done());

        // Outputs of taken splits completed before a failure are removed with the others.
        stealing.outputs.append(&mut out.outputs);
        report.scan = scanned?;
        let finished = out.finish(&matched);
        stealing.outputs.append(&mut out.outputs);
        report.bloom_survivors = survivors;
        report.pruned_exchange_bytes = pruned_bytes;
        report.records_out = out.written;
        report.taken_splits = out.taken_splits;
        let mut part = finished?;
        self.append_taken_here(&mut part, stealing, abort)?;
        part_after_probe(part, stealing)
    }
}

/// A worker's probe in the exact shuffle join: it reads batches, sends their Bloom survivors
/// into the join round by round, and writes the rounds the join has answered.
struct ShuffleProbe<'a, 'w> {
    job: &'a Job,
    worker: &'w mut Worker,
    filter: &'a QueryFilter,
    survivors_in: Handle<u64, Survivor>,
    answered: &'a ProbeHandle<u64>,
    matched: &'a RefCell<Vec<u64>>,
    out: ShufflePart<'a>,
    clock: RoundClock,
    answers: Vec<bool>,
    survivors: u64,
    pruned_bytes: u64,
}

impl ShuffleProbe<'_, '_> {
    /// Reads the worker's own probe splits, claiming each, then takes other workers' splits
    /// while they have some left and this worker is likely to write at most a quarter of the
    /// records it read (as [`Job::probe_splits`] does). A taken split's records wait in this
    /// worker's rounds as a run of their own, which goes to the split's scratch file (for its
    /// owner to append) once answered. Returns the scan's figures; `stealing` gets the claims
    /// made and the splits of this worker's that others took.
    fn read_splits(&mut self, counter: &AtomicU64, stealing: &mut Stealing) -> Result<ScanStats> {
        let (job, me, abort) = (self.job, self.out.files.me, self.out.abort);
        let mut stats = job.read_own_splits(me, abort, stealing, |split| self.read(split, counter))?;
        // Before its answers come, what a worker will write is known only roughly: at most its
        // survivors in a semi-join, at least the records the filter dropped in an anti-join.
        let may_write = |s: &Self, records: u64| if job.anti { records - s.survivors.min(records) } else { s.survivors };
        while !abort.load(Ordering::Relaxed) && may_write(self, stats.records) * 4 <= stats.records {
            let takeable = |split: usize| !job.probe.splits[split].is_stdin();
            let Some((task, claim)) = job.probe_claims.take(me, takeable)? else { break };
            stealing.claims.push(claim);
            let sink = self.out.start_taken(task.split)?;
            self.out.waiting.switch_to(sink);
            stats.absorb(&self.read(task.split, counter)?);
            self.out.waiting.switch_to(OWN_PART);
            self.out.complete_taken()?;
        }
        Ok(stats)
    }

    /// Reads probe split `split`.
    fn read(&mut self, split: usize, counter: &AtomicU64) -> Result<ScanStats> {
        let job = self.job;
        job.probe.scan_feed(&mut std::iter::once(split), self.out.abort, counter, |batch| self.on_batch(batch))
    }

    /// The Bloom step for a batch: its survivors go into the join, numbered as they wait (and
    /// with `--anti` every other record waits too).
    fn on_batch(&mut self, batch: &RecordBatch) -> Result<()> {
        if let Some(header) = self.job.header_read(batch)? {
            self.out.files.read_header = Some(header.to_vec());
        }
        self.filter.contains_batch(batch.keys, &mut self.answers);
        batch.unmatch_nulls(&mut self.answers);
        let me = self.out.files.me as u32;
        for ((key, record), &maybe) in batch.keys.iter().zip(batch.records).zip(&self.answers) {
            if maybe {
                self.survivors_in.send((JoinKey::new(key), me, self.out.waiting.push(record)));
                self.survivors += 1;
            } else {
                self.pruned_bytes += survivor_wire_bytes(key);
                if self.job.anti {
                    self.out.waiting.push(record);
                }
            }
        }
        // A NULL key would not have been exchanged either.
        self.pruned_bytes -= batch.nulls.len() as u64 * survivor_wire_bytes(b"");
        match self.clock.after(batch.records.iter().map(|r| r.len() as u64).sum()) {
            Tick::ReadOn => {}
            Tick::Step => {
                self.worker.step();
            }
            Tick::EndRound => self.end_round()?,
        }
        Ok(())
    }

    /// Ends the round, writes the rounds answered, and waits while too many are not.
    fn end_round(&mut self) -> Result<()> {
        let next = self.survivors_in.time() + 1;
        self.out.waiting.close_round(next);
        self.survivors_in.advance_to(next);
        self.survivors_in.flush();
        loop {
            self.worker.step();
            self.out.write_answered(self.answered, self.matched)?;
            if self.out.waiting.unanswered() <= LAG || self.out.abort.load(Ordering::Relaxed) {
                return Ok(());
            }
            self.worker.step_or_park(PARK);
        }
    }
}

/// The sink of a worker's own part file; the splits it takes have sinks 1, 2, ….
const OWN_PART: usize = 0;

/// An exact shuffle join's output on one worker: the records that wait for the join's answers,
/// and the files they go to.
struct ShufflePart<'j> {
    abort: &'j AtomicBool,
    waiting: WaitingRecords,
    files: ShuffleFiles<'j>,
    /// The complete outputs of taken splits.
    outputs: Vec<PathBuf>,
    taken_splits: u64,
    written: u64,
}

/// A worker's part file in the exact shuffle join, opened at its first write (it starts with
/// the probe's header, which standard input gives only with its first batch), and the scratch
/// files of the splits it took.
struct ShuffleFiles<'j> {
    job: &'j Job,
    me: usize,
    part: Option<TaskFile>,
    /// Standard input's header, where this worker reads it.
    read_header: Option<Vec<u8>>,
    /// The splits taken, and each one's scratch file until it is complete: sink i + 1.
    taken: Vec<(usize, Option<TaskFile>)>,
}

impl Sinks for ShuffleFiles<'_> {
    fn file(&mut self, sink: usize) -> Result<&mut TaskFile> {
        if sink != OWN_PART {
            return Ok(self.taken[sink - 1].1.as_mut().expect("a taken split's file is open until its last round is written"));
        }
        if self.part.is_none() {
            self.part = Some(self.job.open_part(self.me, self.read_header.as_deref())?);
        }
        Ok(self.part.as_mut().expect("opened above"))
    }
}

impl<'j> ShufflePart<'j> {
    fn new(job: &'j Job, me: usize, abort: &'j AtomicBool) -> Self {
        let files = ShuffleFiles { job, me, part: None, read_header: None, taken: Vec::new() };
        ShufflePart { abort, waiting: WaitingRecords::new(1, !job.anti).with_multiline_records(job.probe.options.format.multiline), files, outputs: Vec::new(), taken_splits: 0, written: 0 }
    }

    /// Makes the scratch file of taken split `split`: the sink of its records.
    fn start_taken(&mut self, split: usize) -> Result<usize> {
        let job = self.files.job;
        match TaskFile::create_scratch(&job.dir, &ProbeClaims::taken_name(split)) {
            Ok(scratch) => {
                self.files.taken.push((split, Some(scratch)));
                Ok(self.files.taken.len())
            }
            Err(e) => {
                job.probe_claims.taken_read(split, None);
                Err(e)
            }
        }
    }

    /// Writes the oldest closed round, and completes the outputs of taken splits that have all
    /// their lines.
    fn write_oldest(&mut self, matched: &RefCell<Vec<u64>>) -> Result<()> {
        self.written += self.waiting.write_oldest(&mut matched.borrow_mut(), &mut self.files)?;
        self.complete_taken()
    }

    /// Finishes the scratch files of taken splits whose every line is written, and tells a
    /// waiting owner in this process. While the job is failing (another worker's abort stops a
    /// read midway), the unfinished file is removed instead.
    fn complete_taken(&mut self) -> Result<()> {
        for sink in 1..=self.files.taken.len() {
            if self.files.taken[sink - 1].1.is_none() || self.waiting.waits_for(sink) {
                continue;
            }
            let (split, scratch) = &mut self.files.taken[sink - 1];
            let scratch = scratch.take().expect("checked above");
            let output = if self.abort.load(Ordering::Relaxed) { None } else { Some(scratch.finish()) };
            let output = output.transpose();
            self.files.job.probe_claims.taken_read(*split, output.as_ref().ok().cloned().flatten());
            if let Some(output) = output? {
                self.outputs.push(output);
                self.taken_splits += 1;
            }
        }
        Ok(())
    }

    /// Writes every closed round whose answers are all in `matched`: the join's frontier
    /// (`answered`) is past its timestamp.
    fn write_answered(&mut self, answered: &ProbeHandle<u64>, matched: &RefCell<Vec<u64>>) -> Result<()> {
        while self.waiting.oldest().is_some_and(|time| !answered.less_equal(&time)) {
            self.write_oldest(matched)?;
        }
        Ok(())
    }

    /// Once the join is done, writes the records still waiting and completes the taken splits'
    /// outputs: the part file (made here if nothing was written to it), still open.
    fn finish(&mut self, matched: &RefCell<Vec<u64>>) -> Result<TaskFile> {
        self.waiting.close_round(u64::MAX);
        while self.waiting.unanswered() > 0 {
            self.write_oldest(matched)?;
        }
        self.complete_taken()?;
        self.files.file(OWN_PART)?;
        Ok(self.files.part.take().expect("opened above"))
    }
}

/// A shuffle probe that fails leaves no owner waiting for a taken split's output (the unfinished
/// scratch file removes itself).
impl Drop for ShuffleFiles<'_> {
    fn drop(&mut self) {
        for (split, scratch) in &self.taken {
            if scratch.is_some() {
                self.job.probe_claims.taken_read(*split, None);
            }
        }
    }
}
