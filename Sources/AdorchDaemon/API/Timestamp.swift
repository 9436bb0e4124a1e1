import Foundation

/// RFC 3339 UTC to the millisecond, "2026-11-24T17:01:09.401Z", as every time in replies and
/// events is written: what .iso8601 with fractional seconds writes, without the Calendar and
/// ICU time zone it builds first (which faults in ICU's code and 700 KB of its zone data in
/// every daemon, and costs a Show reply more than the rest of its JSON).
func timestamp(_ date: Date) -> String {
    // Whole seconds, then the fraction's milliseconds cut (not rounded), as Foundation does.
    let whole = date.timeIntervalSince1970.rounded(.down)
    var seconds = time_t(whole)
    let millisecond = min(999, Int((date.timeIntervalSince1970 - whole) * 1000))
    var t = tm()
    gmtime_r(&seconds, &t)
    func digits(_ value: Int, _ width: Int) -> String {
        let text = String(value)
        return String(repeating: "0", count: max(0, width - text.count)) + text
    }
    return "\(digits(Int(t.tm_year) + 1900, 4))-\(digits(Int(t.tm_mon) + 1, 2))-\(digits(Int(t.tm_mday), 2))T"
        + "\(digits(Int(t.tm_hour), 2)):\(digits(Int(t.tm_min), 2)):\(digits(Int(t.tm_sec), 2))."
        + "\(digits(millisecond, 3))Z"
}
