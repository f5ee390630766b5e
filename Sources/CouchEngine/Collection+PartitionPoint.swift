extension Collection {
    /// The index of the first element for which `belongs` is false, `belongs` being true for a
    /// prefix of the collection (a binary search).
    func partitionPoint(_ belongs: (Element) -> Bool) -> Index {
        var low = startIndex
        var count = self.count
        while count > 0 {
            let half = count / 2
            let middle = index(low, offsetBy: half)
            if belongs(self[middle]) {
                low = index(after: middle)
                count -= half + 1
            } else {
                count = half
            }
        }
        return low
    }
}
