//! The resolution rules of a proposal, as pure functions of its votes.
//!
//! - Nothing resolves below the quorum.
//! - plurality: the most votes wins; a tie goes to the tie-breaker.
//! - majority: more than half of the cast votes, else it stays open (a revote can
//!   break the deadlock).
//! - unanimous: every cast vote names the same option.
//! - Tie-breakers: `first` (option order), `random`, `creator-decides` (the creator's
//!   own vote picks among the tied options; without it the proposal stays open and
//!   the creator is asked to decide).
//! - Expiry: whatever the rule, the plurality winner of the cast votes, ties broken by
//!   the tie-breaker (creator-decides falls back to option order if the creator never
//!   decided, because an expired proposal cannot wait any longer). No votes, no winner.

use rand::seq::IndexedRandom;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolution {
    Plurality,
    Majority,
    Unanimous,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TieBreaker {
    First,
    Random,
    CreatorDecides,
}

/// A rule's name as stored and typed; one table per enum, so parsing, display and the
/// "use one of" hint cannot drift apart.
pub trait Named: Copy + PartialEq + 'static {
    const ALL: &'static [(&'static str, Self)];
    fn name(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(_, v)| *v == self)
            .map_or("", |(n, _)| n)
    }
    fn parse(s: &str) -> Option<Self> {
        let s = s.trim().to_ascii_lowercase();
        Self::ALL.iter().find(|(n, _)| *n == s).map(|(_, v)| *v)
    }
    fn names() -> String {
        Self::ALL
            .iter()
            .map(|(n, _)| *n)
            .collect::<Vec<_>>()
            .join(", ")
    }
}

impl Named for Resolution {
    const ALL: &'static [(&'static str, Self)] = &[
        ("plurality", Self::Plurality),
        ("majority", Self::Majority),
        ("unanimous", Self::Unanimous),
    ];
}

impl Named for TieBreaker {
    const ALL: &'static [(&'static str, Self)] = &[
        ("first", Self::First),
        ("random", Self::Random),
        ("creator-decides", Self::CreatorDecides),
    ];
}

/// A cast vote: who, and the option id they chose.
#[derive(Debug, Clone)]
pub struct Cast {
    pub voter: String,
    pub choice: String,
}

/// Where a proposal stands after its votes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Winner(String),
    /// Fewer votes than the quorum.
    Waiting {
        votes: usize,
        quorum: usize,
    },
    /// A plurality tie that only the creator's vote can break.
    CreatorMustDecide(Vec<String>),
    NoMajority,
    NotUnanimous,
}

pub struct Rules<'a> {
    pub options: &'a [String],
    pub resolution: Resolution,
    pub quorum: usize,
    pub tie_breaker: TieBreaker,
    pub creator: &'a str,
}

/// The option ids with the most votes, in option order, and that count.
fn top(options: &[String], votes: &[Cast]) -> (Vec<String>, usize) {
    let counts: Vec<usize> = options
        .iter()
        .map(|o| votes.iter().filter(|v| &v.choice == o).count())
        .collect();
    let max = counts.iter().copied().max().unwrap_or(0);
    if max == 0 {
        return (Vec::new(), 0);
    }
    let tied = options
        .iter()
        .zip(&counts)
        .filter(|(_, c)| **c == max)
        .map(|(o, _)| o.clone())
        .collect();
    (tied, max)
}

impl Rules<'_> {
    fn creator_choice<'v>(&self, votes: &'v [Cast]) -> Option<&'v str> {
        votes
            .iter()
            .find(|v| v.voter.eq_ignore_ascii_case(self.creator))
            .map(|v| v.choice.as_str())
    }

    /// Picks one of `tied`, or `None` when the creator has to decide and has not.
    fn break_tie(&self, tied: &[String], votes: &[Cast]) -> Option<String> {
        match self.tie_breaker {
            TieBreaker::First => tied.first().cloned(),
            TieBreaker::Random => tied.choose(&mut rand::rng()).cloned(),
            TieBreaker::CreatorDecides => self
                .creator_choice(votes)
                .filter(|c| tied.iter().any(|t| t == c))
                .map(str::to_owned),
        }
    }

    pub fn outcome(&self, votes: &[Cast]) -> Outcome {
        if votes.len() < self.quorum {
            return Outcome::Waiting {
                votes: votes.len(),
                quorum: self.quorum,
            };
        }
        let (tied, count) = top(self.options, votes);
        match self.resolution {
            Resolution::Plurality => match tied.len() {
                0 => Outcome::Waiting {
                    votes: 0,
                    quorum: self.quorum,
                },
                1 => Outcome::Winner(tied[0].clone()),
                _ => match self.break_tie(&tied, votes) {
                    Some(w) => Outcome::Winner(w),
                    None => Outcome::CreatorMustDecide(tied),
                },
            },
            Resolution::Majority if count * 2 > votes.len() => Outcome::Winner(tied[0].clone()),
            Resolution::Majority => Outcome::NoMajority,
            Resolution::Unanimous if tied.len() == 1 && count == votes.len() => {
                Outcome::Winner(tied[0].clone())
            }
            Resolution::Unanimous => Outcome::NotUnanimous,
        }
    }

    /// The winner when time runs out (see the module docs).
    pub fn expiry_winner(&self, votes: &[Cast]) -> Option<String> {
        let (tied, _) = top(self.options, votes);
        match tied.len() {
            0 => None,
            1 => Some(tied[0].clone()),
            _ => self
                .break_tie(&tied, votes)
                .or_else(|| tied.first().cloned()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(ids: &[&str]) -> Vec<String> {
        ids.iter().map(|s| s.to_string()).collect()
    }
    fn votes(v: &[(&str, &str)]) -> Vec<Cast> {
        v.iter()
            .map(|(voter, choice)| Cast {
                voter: voter.to_string(),
                choice: choice.to_string(),
            })
            .collect()
    }
    fn rules(
        options: &[String],
        resolution: Resolution,
        quorum: usize,
        tie: TieBreaker,
    ) -> Rules<'_> {
        Rules {
            options,
            resolution,
            quorum,
            tie_breaker: tie,
            creator: "alice",
        }
    }

    #[test]
    fn quorum_comes_first() {
        let o = opts(&["a", "b"]);
        let r = rules(&o, Resolution::Plurality, 3, TieBreaker::First);
        assert_eq!(
            r.outcome(&votes(&[("x", "a"), ("y", "a")])),
            Outcome::Waiting {
                votes: 2,
                quorum: 3
            }
        );
        assert_eq!(
            r.outcome(&votes(&[("x", "a"), ("y", "a"), ("z", "b")])),
            Outcome::Winner("a".into())
        );
    }

    #[test]
    fn plurality_ties() {
        let o = opts(&["a", "b", "c"]);
        let v = votes(&[("bob", "b"), ("carol", "c")]);
        assert_eq!(
            rules(&o, Resolution::Plurality, 2, TieBreaker::First).outcome(&v),
            Outcome::Winner("b".into()),
            "first = option order among the tied"
        );
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..200 {
            let Outcome::Winner(w) =
                rules(&o, Resolution::Plurality, 2, TieBreaker::Random).outcome(&v)
            else {
                panic!("random always picks");
            };
            assert!(w == "b" || w == "c");
            seen.insert(w);
        }
        assert_eq!(seen.len(), 2, "random does not always pick the same option");
        let cd = rules(&o, Resolution::Plurality, 2, TieBreaker::CreatorDecides);
        assert_eq!(
            cd.outcome(&v),
            Outcome::CreatorMustDecide(opts(&["b", "c"]))
        );
        let with_creator = votes(&[("bob", "b"), ("Alice", "c"), ("carol", "b"), ("dave", "c")]);
        assert_eq!(cd.outcome(&with_creator), Outcome::Winner("c".into()));
        // The creator voted for an option that is not among the tied ones: still open.
        let off = votes(&[
            ("bob", "b"),
            ("carol", "c"),
            ("dave", "b"),
            ("erin", "c"),
            ("alice", "a"),
        ]);
        assert_eq!(
            cd.outcome(&off),
            Outcome::CreatorMustDecide(opts(&["b", "c"]))
        );
    }

    #[test]
    fn majority_and_deadlock() {
        let o = opts(&["a", "b", "c"]);
        let r = rules(&o, Resolution::Majority, 3, TieBreaker::First);
        assert_eq!(
            r.outcome(&votes(&[("x", "a"), ("y", "b"), ("z", "c")])),
            Outcome::NoMajority
        );
        assert_eq!(
            r.outcome(&votes(&[("x", "a"), ("y", "a"), ("z", "c")])),
            Outcome::Winner("a".into())
        );
        assert_eq!(
            r.outcome(&votes(&[("w", "a"), ("x", "a"), ("y", "b"), ("z", "b")])),
            Outcome::NoMajority,
            "exactly half is not a majority"
        );
    }

    #[test]
    fn unanimous() {
        let o = opts(&["yes", "no"]);
        let r = rules(&o, Resolution::Unanimous, 2, TieBreaker::First);
        assert_eq!(
            r.outcome(&votes(&[("x", "yes"), ("y", "no")])),
            Outcome::NotUnanimous
        );
        assert_eq!(
            r.outcome(&votes(&[("x", "yes"), ("y", "yes")])),
            Outcome::Winner("yes".into())
        );
    }

    #[test]
    fn expiry_uses_plurality_whatever_the_rule() {
        let o = opts(&["a", "b"]);
        let r = rules(&o, Resolution::Unanimous, 5, TieBreaker::CreatorDecides);
        assert_eq!(r.expiry_winner(&[]), None);
        assert_eq!(r.expiry_winner(&votes(&[("x", "b")])), Some("b".into()));
        assert_eq!(
            r.expiry_winner(&votes(&[("x", "a"), ("y", "b")])),
            Some("a".into()),
            "an undecided creator falls back to option order"
        );
        assert_eq!(
            r.expiry_winner(&votes(&[
                ("x", "a"),
                ("alice", "b"),
                ("y", "b"),
                ("z", "a")
            ])),
            Some("b".into())
        );
    }
}
