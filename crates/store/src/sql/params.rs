//! A statement's parameters, in the shapes the kernel writes them.

use super::ToSql;

/// A statement's parameters: `()`, a tuple, an array, or `params![...]`, bound in
/// order to `?1`, `?2`, ...
pub trait Params {
    /// Calls `f` with the parameters as one slice, borrowed from `self`.
    fn with_slice<R>(self, f: impl FnOnce(&[&dyn ToSql]) -> R) -> R;
}

impl Params for () {
    fn with_slice<R>(self, f: impl FnOnce(&[&dyn ToSql]) -> R) -> R {
        f(&[])
    }
}

impl Params for &[&dyn ToSql] {
    fn with_slice<R>(self, f: impl FnOnce(&[&dyn ToSql]) -> R) -> R {
        f(self)
    }
}

impl<T: ToSql, const N: usize> Params for [T; N] {
    fn with_slice<R>(self, f: impl FnOnce(&[&dyn ToSql]) -> R) -> R {
        let refs: [&dyn ToSql; N] = std::array::from_fn(|i| &self[i] as &dyn ToSql);
        f(&refs)
    }
}

impl<T: ToSql, const N: usize> Params for &[T; N] {
    fn with_slice<R>(self, f: impl FnOnce(&[&dyn ToSql]) -> R) -> R {
        let refs: [&dyn ToSql; N] = std::array::from_fn(|i| &self[i] as &dyn ToSql);
        f(&refs)
    }
}

macro_rules! tuple_params {
    ($($name:ident $idx:tt),+) => {
        impl<$($name: ToSql),+> Params for ($($name,)+) {
            fn with_slice<R>(self, f: impl FnOnce(&[&dyn ToSql]) -> R) -> R {
                f(&[$(&self.$idx as &dyn ToSql),+])
            }
        }
    };
}
tuple_params!(A 0);
tuple_params!(A 0, B 1);
tuple_params!(A 0, B 1, C 2);
tuple_params!(A 0, B 1, C 2, D 3);
tuple_params!(A 0, B 1, C 2, D 3, E 4);
tuple_params!(A 0, B 1, C 2, D 3, E 4, F 5);
tuple_params!(A 0, B 1, C 2, D 3, E 4, F 5, G 6);
tuple_params!(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7);
tuple_params!(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8);
tuple_params!(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9);
tuple_params!(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10);
tuple_params!(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10, L 11);
