extension Comparable {
    /// This value, or the nearer end of `range` when it lies outside.
    public func clamped(to range: ClosedRange<Self>) -> Self {
        Swift.min(Swift.max(self, range.lowerBound), range.upperBound)
    }
}

extension FixedWidthInteger {
    /// `self + other`, or `max`/`min` where the sum does not fit.
    public func addingSaturating(_ other: Self) -> Self {
        let (sum, overflow) = addingReportingOverflow(other)
        return overflow ? (other > 0 ? .max : .min) : sum
    }

    /// `self × other`, or `max`/`min` where the product does not fit: for sizes and budgets
    /// made of numbers a user, a file or the system gave.
    public func multipliedSaturating(by other: Self) -> Self {
        let (product, overflow) = multipliedReportingOverflow(by: other)
        return overflow ? ((self < 0) == (other < 0) ? .max : .min) : product
    }
}
