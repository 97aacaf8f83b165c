//! A table of a small, fixed vocabulary of strings (event types, keys) looked up per event: the
//! words are bucketed by length, so a lookup compares the text with the few words of its length
//! only, and with a word's first and last bytes before the whole of it.

/// Words of a fixed vocabulary with a value each, bucketed by length.
#[derive(Debug)]
pub(crate) struct ByLength<T> {
    buckets: Vec<Vec<(&'static str, T)>>,
}

impl<T: Default> ByLength<T> {
    /// An empty table.
    pub(crate) fn new() -> Self {
        ByLength {
            buckets: Vec::new(),
        }
    }

    /// The value of `word`, added (as `T::default()`) if the table does not hold it yet.
    pub(crate) fn entry(&mut self, word: &'static str) -> &mut T {
        if self.buckets.len() <= word.len() {
            self.buckets.resize_with(word.len() + 1, Vec::new);
        }
        let bucket = &mut self.buckets[word.len()];
        let at = match bucket.iter().position(|(w, _)| *w == word) {
            Some(at) => at,
            None => {
                bucket.push((word, T::default()));
                bucket.len() - 1
            }
        };
        &mut bucket[at].1
    }
}

impl<T> ByLength<T> {
    /// The table's copy of `text` and its value, if the table holds `text`.
    pub(crate) fn get(&self, text: &[u8]) -> Option<(&'static str, &T)> {
        let (&first, &last) = (text.first()?, text.last()?);
        self.buckets
            .get(text.len())?
            .iter()
            .find(|(w, _)| {
                let b = w.as_bytes();
                b[0] == first && b[b.len() - 1] == last && b == text
            })
            .map(|(w, value)| (*w, value))
    }
}

#[cfg(test)]
mod tests {
    use super::ByLength;

    #[test]
    fn a_word_is_found_with_its_value_and_other_text_is_not() {
        let mut table = ByLength::<Vec<u32>>::new();
        for (i, word) in ["type", "tool", "turn/end", "text-delta", "tyqe"]
            .into_iter()
            .enumerate()
        {
            table.entry(word).push(i as u32);
        }
        table.entry("type").push(9);
        assert_eq!(table.get(b"type"), Some(("type", &vec![0, 9])));
        assert_eq!(table.get(b"tyqe"), Some(("tyqe", &vec![4])));
        assert_eq!(table.get(b"text-delta"), Some(("text-delta", &vec![3])));
        for other in [
            &b""[..],
            b"t",
            b"typo",
            b"turn/enD",
            b"text-delta!",
            b"tool/call/x",
        ] {
            assert_eq!(table.get(other), None, "{other:?}");
        }
    }
}
