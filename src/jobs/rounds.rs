//! The probe records of the exact shuffle join that wait for the join's answers, round by round.
//!
//! The shuffle join sends each Bloom survivor's key, numbered, to the worker that holds that
//! key's build keys, and gets back the numbers that matched; the records themselves stay with
//! the worker that read them. A worker reads its probe in rounds of about [`ROUND_BYTES`] of
//! input, whose survivors enter the join at timestamp r. Once the join's output frontier is
//! past r, every answer of round r is in, and the round's records are written in input order:
//! to the worker's part file, or for a split it took from another worker, to that split's
//! scratch file ([`Sinks`]). A worker reads at most [`LAG`] rounds ahead of its oldest
//! unanswered one, so the records that wait are bounded: memory does not grow with the input,
//! and nothing waits on disk.

use crate::error::Result;
use crate::output::TaskFile;
use std::collections::VecDeque;

/// Probe bytes read per round: large enough that a round's progress round trip (one per worker,
/// across processes too) costs little, small enough that an anti-join's waiting records (every
/// record of the unanswered rounds) take a few MiB.
pub const ROUND_BYTES: u64 = 4 << 20;

/// Probe bytes read between two steps of the worker's dataflow within a round.
pub const STEP_BYTES: u64 = 1 << 20;

/// How many read rounds may be unanswered while a worker reads the next: the join works on
/// them while the worker reads.
pub const LAG: usize = 2;

/// What a worker does after reading a batch of its probe.
#[derive(Debug, PartialEq, Eq)]
pub enum Tick {
    /// Reads on.
    ReadOn,
    /// Gives the join's dataflow a step, so that a round's answers come while the next is read.
    Step,
    /// Ends the round.
    EndRound,
}

/// Counts the probe bytes a worker reads: a round every [`ROUND_BYTES`], a step every
/// [`STEP_BYTES`] within it.
#[derive(Default)]
pub struct RoundClock {
    read: u64,
}

impl RoundClock {
    /// What to do after a batch of `bytes`.
    pub fn after(&mut self, bytes: u64) -> Tick {
        let before = self.read;
        self.read += bytes;
        if self.read >= ROUND_BYTES {
            self.read = 0;
            Tick::EndRound
        } else if self.read / STEP_BYTES != before / STEP_BYTES {
            Tick::Step
        } else {
            Tick::ReadOn
        }
    }
}

/// A round's waiting records: whole lines (or with `--multiline`, records that may hold
/// newlines), numbered from `first` on, and the files they go to.
struct Round {
    /// The join timestamp of the round's survivors.
    time: u64,
    first: u64,
    lines: Vec<u8>,
    count: u64,
    /// Where each record ends in `lines`, kept only for records that may hold newlines
    /// (`--multiline`); otherwise each line is a record.
    ends: Vec<usize>,
    /// Runs of lines for one sink each (see [`Sinks`]): the sink, and where its run starts in
    /// `lines`; a run ends where the next one starts. Never empty: the last run takes new lines.
    runs: Vec<(usize, usize)>,
}

impl Round {
    fn new(time: u64, first: u64, sink: usize) -> Self {
        Round { time, first, lines: Vec::new(), count: 0, ends: Vec::new(), runs: vec![(sink, 0)] }
    }

    /// The sink new lines go to.
    fn sink(&self) -> usize {
        self.runs.last().expect("a round has a run").0
    }

    /// Whether any of the round's lines go to `sink`, or new ones would.
    fn feeds(&self, sink: usize) -> bool {
        self.runs.iter().any(|&(s, _)| s == sink)
    }
}

/// The files a worker's waiting records go to, by number: its part file, and the scratch files
/// of the splits it took from other workers (which their owners append to their parts).
pub trait Sinks {
    fn file(&mut self, sink: usize) -> Result<&mut TaskFile>;
}

/// A single file takes every sink's lines.
impl Sinks for TaskFile {
    fn file(&mut self, _sink: usize) -> Result<&mut TaskFile> {
        Ok(self)
    }
}

/// The records that wait for the join's answers: the open round, which takes new records,
/// and the closed rounds whose answers are not all in, oldest first.
pub struct WaitingRecords {
    closed: VecDeque<Round>,
    open: Round,
    /// Whether a matched record is written (the semi-join) or every other one (the anti-join).
    keep_matched: bool,
    /// Whether a record may hold newlines (`--multiline`): then its end is kept.
    multiline: bool,
}

impl WaitingRecords {
    /// No records yet; the first round's survivors enter the join at `time`, and its records go
    /// to sink 0.
    pub fn new(time: u64, keep_matched: bool) -> Self {
        WaitingRecords { closed: VecDeque::new(), open: Round::new(time, 0, 0), keep_matched, multiline: false }
    }

    /// Records that may hold newlines (`--multiline`) are kept with their ends, not cut at
    /// their newlines when written.
    pub fn with_multiline_records(mut self, multiline: bool) -> Self {
        self.multiline = multiline;
        self
    }

    /// Adds `record` to the open round (with a newline where its input's last line lacked one)
    /// and returns its number: the number the join answers with.
    pub fn push(&mut self, record: &[u8]) -> u64 {
        let round = &mut self.open;
        round.lines.extend_from_slice(record);
        if !record.ends_with(b"\n") {
            round.lines.push(b'\n');
        }
        if self.multiline {
            round.ends.push(round.lines.len());
        }
        round.count += 1;
        round.first + round.count - 1
    }

    /// Sends the records pushed from now on to `sink`. A switch ends no round: a worker that
    /// takes many small splits does not wait for the join once per split.
    pub fn switch_to(&mut self, sink: usize) {
        let round = &mut self.open;
        match round.runs.last_mut() {
            Some(last) if last.1 == round.lines.len() => last.0 = sink,
            _ => round.runs.push((sink, round.lines.len())),
        }
    }

    /// Closes the open round; the next one's survivors enter the join at `time`, and its records
    /// go to the same sink.
    pub fn close_round(&mut self, time: u64) {
        let first = self.open.first + self.open.count;
        let next = Round::new(time, first, self.open.sink());
        let closed = std::mem::replace(&mut self.open, next);
        if closed.count > 0 {
            self.closed.push_back(closed);
        }
    }

    /// The timestamp of the oldest closed round not yet written.
    pub fn oldest(&self) -> Option<u64> {
        self.closed.front().map(|round| round.time)
    }

    /// Whether records for `sink` wait, or may still come (new records go to it).
    pub fn waits_for(&self, sink: usize) -> bool {
        self.open.feeds(sink) || self.closed.iter().any(|round| round.feeds(sink))
    }

    /// How many closed rounds wait for answers.
    pub fn unanswered(&self) -> usize {
        self.closed.len()
    }

    /// Writes the oldest closed round to its `sinks`, every answer of which is in `matched` (the
    /// numbers of matched records, in any order, a number listed once per build key it matched;
    /// numbers of later rounds may be there too). Takes the round's numbers out of `matched`,
    /// and returns how many records were written.
    pub fn write_oldest(&mut self, matched: &mut Vec<u64>, sinks: &mut impl Sinks) -> Result<u64> {
        let Some(round) = self.closed.pop_front() else { return Ok(0) };
        let end = round.first + round.count;
        matched.sort_unstable();
        let answered = matched.partition_point(|&n| n < end);
        let ours: Vec<u64> = matched.drain(..answered).map(|n| n - round.first).collect();
        let mut lines = Selection::new(&ours, self.keep_matched);
        let ends = round.runs.iter().skip(1).map(|&(_, start)| start).chain([round.lines.len()]);
        for (&(sink, start), end) in round.runs.iter().zip(ends) {
            let block = &round.lines[start..end];
            if self.multiline {
                let records = round.ends.partition_point(|&e| e <= start)..round.ends.partition_point(|&e| e <= end);
                lines.copy(block, round.ends[records].iter().map(|&e| e - start), sinks.file(sink)?)?;
            } else {
                lines.copy(block, memchr::memchr_iter(b'\n', block).map(|i| i + 1), sinks.file(sink)?)?;
            }
        }
        Ok(lines.written)
    }
}

/// Which of a run of lines are kept, taken in order: those whose index is listed as matched, or
/// with `keep_matched` false the others.
struct Selection<'m> {
    wanted: std::iter::Peekable<std::iter::Copied<std::slice::Iter<'m, u64>>>,
    keep_matched: bool,
    /// The index of the next line.
    index: u64,
    /// The lines kept so far.
    written: u64,
}

impl<'m> Selection<'m> {
    /// The selection by `matched` (sorted; an index may be listed more than once).
    fn new(matched: &'m [u64], keep_matched: bool) -> Self {
        Selection { wanted: matched.iter().copied().peekable(), keep_matched, index: 0, written: 0 }
    }

    /// Whether the next line is kept (counting it if so).
    fn keeps_next(&mut self) -> bool {
        let matched = self.wanted.next_if_eq(&self.index).is_some();
        while self.wanted.next_if_eq(&self.index).is_some() {}
        self.index += 1;
        let kept = matched == self.keep_matched;
        self.written += kept as u64;
        kept
    }

    /// Writes the kept records of `block` (whole records, each ending in a newline, which end
    /// at `ends`), each run of them in one write: an anti-join writes nearly all of its records
    /// here.
    fn copy(&mut self, block: &[u8], ends: impl Iterator<Item = usize>, part: &mut TaskFile) -> Result<()> {
        let (mut line_start, mut run_start) = (0, None);
        for end in ends {
            if self.keeps_next() {
                run_start.get_or_insert(line_start);
            } else if let Some(start) = run_start.take() {
                part.write(&block[start..line_start])?;
            }
            line_start = end;
        }
        if let Some(start) = run_start {
            part.write(&block[start..line_start])?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    /// A round ends at the first batch that brings its bytes to [`ROUND_BYTES`], and a step comes
    /// at each [`STEP_BYTES`] boundary crossed within it.
    #[test]
    fn the_clock_ends_rounds_and_steps_by_bytes_read() {
        let mut clock = RoundClock::default();
        let ticks: Vec<Tick> = (0..12).map(|_| clock.after(ROUND_BYTES / 5 + 1)).collect();
        let steps_per_round = (ROUND_BYTES / STEP_BYTES - 1) as usize; // the last one ends the round
        let round: Vec<usize> = ticks.iter().enumerate().filter(|(_, t)| **t == Tick::EndRound).map(|(i, _)| i).collect();
        assert_eq!(round, [4, 9], "{ticks:?}");
        assert_eq!(ticks[..4].iter().filter(|t| **t == Tick::Step).count(), steps_per_round, "{ticks:?}");
        let mut clock = RoundClock::default();
        assert_eq!(clock.after(ROUND_BYTES + 1), Tick::EndRound);
        assert_eq!(clock.after(1), Tick::ReadOn);
        assert_eq!(clock.after(STEP_BYTES), Tick::Step);
    }

    /// Three files, as a worker's part and the scratch files of two splits it took.
    impl Sinks for Vec<TaskFile> {
        fn file(&mut self, sink: usize) -> Result<&mut TaskFile> {
            Ok(&mut self[sink])
        }
    }

    /// Rounds of random lines (some empty of waiting records, one line a few MiB long, the last
    /// line without a newline), sent to three sinks in runs that switch within rounds and across
    /// them, written as their answers come: each sink gets exactly its matched lines, or exactly
    /// its others, in order; answers of later rounds wait in `matched` untouched; and a sink is
    /// waited for exactly while some of its lines are unwritten or it takes new ones.
    #[test]
    fn rounds_write_the_chosen_lines_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let mut rng = rand::rngs::StdRng::seed_from_u64(5);
        let mut lines: Vec<Vec<u8>> = (0..60_000u32)
            .map(|i| {
                let len = if i % 20_000 == 7 { 3 << 20 } else { rng.gen_range(0..60) };
                let mut line = format!("{i}:").into_bytes();
                line.extend((0..len).map(|j| b'a' + (j % 26) as u8));
                line.push(b'\n');
                line
            })
            .collect();
        lines.last_mut().unwrap().pop();
        // The same records, a third of them holding newlines, as --multiline reads them.
        let quoted: Vec<Vec<u8>> = lines
            .iter()
            .enumerate()
            .map(|(i, line)| match i % 3 {
                0 => [&b"\"a\nb\n\","[..], &line[..]].concat(),
                _ => line.clone(),
            })
            .collect();
        let plain = lines;
        for (density, keep_matched, multiline) in
            [(0.02, true, false), (0.02, false, false), (0.9, true, false), (0.9, false, false), (0.0, false, false), (0.02, true, true), (0.9, false, true)]
        {
            let lines = if multiline { &quoted } else { &plain };
            // Some lines listed twice or three times, as a join with repeated build keys may.
            let matched: Vec<u64> = (0..lines.len() as u64)
                .filter(|_| rng.gen_bool(density))
                .flat_map(|i| std::iter::repeat_n(i, 1 + (i % 7 == 0) as usize + (i % 11 == 0) as usize))
                .collect();
            let mut sinks: Vec<TaskFile> = (0..3).map(|s| TaskFile::create_scratch(dir.path(), &format!("sink{s}")).unwrap()).collect();
            let mut waiting = WaitingRecords::new(1, keep_matched).with_multiline_records(multiline);
            let (mut answers, mut written, mut time) = (Vec::new(), 0, 1);
            let mut to_answer = matched.iter().copied().peekable();
            // Each line's sink; the lines not yet written, by sink.
            let (mut sink_of, mut sink) = (Vec::new(), 0);
            let mut unwritten = [0u64; 3];
            for (i, line) in lines.iter().enumerate() {
                if rng.gen_bool(0.0005) {
                    sink = rng.gen_range(0..3);
                    waiting.switch_to(sink);
                }
                sink_of.push(sink);
                unwritten[sink] += 1;
                assert_eq!(waiting.push(line), i as u64);
                // The join's answers for the records read so far, in any order.
                while let Some(n) = to_answer.next_if(|&n| n == i as u64) {
                    answers.insert(rng.gen_range(0..=answers.len()), n);
                }
                if rng.gen_bool(0.001) {
                    time += 1;
                    waiting.close_round(time);
                    if rng.gen_bool(0.3) {
                        time += 1;
                        waiting.close_round(time); // an empty round: nothing waits for it
                    }
                }
                if rng.gen_bool(0.002) && waiting.unanswered() > 0 {
                    written += waiting.write_oldest(&mut answers, &mut sinks).unwrap();
                    // What is still unwritten: the lines of the closed rounds and the open one.
                    let first_unwritten = i + 1 - (waiting.closed.iter().map(|r| r.count).sum::<u64>() + waiting.open.count) as usize;
                    unwritten = [0; 3];
                    sink_of[first_unwritten..=i].iter().for_each(|&s| unwritten[s] += 1);
                }
                for (s, &left) in unwritten.iter().enumerate() {
                    assert_eq!(waiting.waits_for(s), left > 0 || s == sink, "sink {s} at line {i}");
                }
            }
            waiting.close_round(time + 1);
            while waiting.unanswered() > 0 {
                written += waiting.write_oldest(&mut answers, &mut sinks).unwrap();
            }
            assert!(answers.is_empty());
            let mut kept_total = 0;
            for (s, file) in sinks.into_iter().enumerate() {
                let got = std::fs::read(file.finish().unwrap()).unwrap();
                let kept: Vec<(usize, &Vec<u8>)> = lines
                    .iter()
                    .enumerate()
                    .filter(|&(i, _)| sink_of[i] == s && matched.binary_search(&(i as u64)).is_ok() == keep_matched)
                    .collect();
                let mut want: Vec<u8> = kept.iter().flat_map(|(_, l)| l.iter().copied()).collect();
                if kept.last().is_some_and(|&(i, _)| i == lines.len() - 1) {
                    want.push(b'\n'); // the last line, given its newline
                }
                kept_total += kept.len();
                assert!(got == want, "density {density} keep_matched {keep_matched} multiline {multiline} sink {s}: {} bytes, want {}", got.len(), want.len());
            }
            assert_eq!(written as usize, kept_total);
        }
    }
}
