use std::collections::HashMap;

/// Stock levels per product code.
#[derive(Debug, Default)]
pub struct Inventory {
    stock: HashMap<String, u32>,
}

impl Inventory {
    /// Adds `count` units of `code`.
    pub fn add(&mut self, code: &str, count: u32) {
        *self.stock.entry(code.to_string()).or_insert(0) += count;
    }

    #[inline]
    pub fn count(&self, code: &str) -> u32 {
        *self.stock.get(code).unwrap_or(&0)
    }
}

pub fn total_units(inv: &Inventory) -> u32 {
    inv.stock.values().sum()
}
