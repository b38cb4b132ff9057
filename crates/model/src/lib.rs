//! Model checking of the election core (work in progress).
