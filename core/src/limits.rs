//! The sizes a network's shapes may reach, which the layer list ([`crate::layers`]) and the
//! convolution and pooling geometries ([`crate::conv`]) both check: every size they compute
//! (in 64 bits) is checked against these before it is used, so none wraps in the 32 bits they
//! are kept in. Imports nothing of core, so both can import it.

/// Widest layer, and most elements of one sample between layers (and of a convolution's patch,
/// a row of its weight).
pub const MAX_WIDTH: u32 = 1 << 16;

/// Most elements of one zero-padded image (a padded convolution's input, as the array copies
/// it): the ISA's 4 GiB of DRAM holds no more in BF16. Padding past it is refused, so a padded
/// side fits an `i32` and a batch of padded images' bytes a `u64`.
pub const MAX_PADDED_IMAGE: u64 = 1 << 31;
