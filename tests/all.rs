//! End-to-end tests: each drives the real `bridle` binary.
#![cfg(test)]

mod suite;
