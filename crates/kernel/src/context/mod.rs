//! Context: what a team shares besides its channel. Documents behind providers
//! (files or the database) and proposals with votes. Both post to the channel
//! through messaging, below them.

pub mod documents;
pub mod proposals;
