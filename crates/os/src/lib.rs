//! What the kernel and its workers ask of the operating system: supervising a
//! subprocess (its process group, bounded output, limits, kill and sweep) and giving
//! freed memory back.

pub mod bounded;
pub mod cgroup;
pub mod group;
pub mod memory;
pub mod process;
pub mod sandbox;
