//! Raw access for tests that plant damage or read what a write left (`#[cfg(test)]` only): the
//! storage seam through which unit tests outside `store/` inject faults without the handle.

use rocksdb::DBPinnableSlice;

use super::Store;

impl Store {
    /// The raw value of `key` in column family `cf`.
    pub(crate) fn raw_get(&self, cf: &str, key: &[u8]) -> Option<Vec<u8>> {
        self.db
            .get_pinned_cf(self.cf(cf).expect("cf"), key)
            .expect("raw get")
            .map(|v: DBPinnableSlice<'_>| v.to_vec())
    }

    /// Put `key` = `value` in column family `cf`, bypassing every rule.
    pub(crate) fn raw_put(&self, cf: &str, key: &[u8], value: &[u8]) {
        self.db
            .put_cf(self.cf(cf).expect("cf"), key, value)
            .expect("raw put");
    }

    /// Delete `key` of column family `cf`, bypassing every rule.
    pub(crate) fn raw_delete(&self, cf: &str, key: &[u8]) {
        self.db
            .delete_cf(self.cf(cf).expect("cf"), key)
            .expect("raw delete");
    }

    /// RocksDB's integer property `name` of column family `cf`.
    pub(crate) fn raw_property(&self, cf: &str, name: &str) -> u64 {
        self.db
            .property_int_value_cf(self.cf(cf).expect("cf"), name)
            .expect("property")
            .expect("a value")
    }
}
