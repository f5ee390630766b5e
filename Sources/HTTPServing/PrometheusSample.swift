/// One line of Prometheus' text format: a metric's name, its labels and its value.
public struct PrometheusSample: Sendable, Equatable {
    public var name: String
    public var labels: [String: String]
    public var value: Double

    public init(name: String, labels: [String: String] = [:], value: Double) {
        self.name = name
        self.labels = labels
        self.value = value
    }

    /// The samples of a text exposition (`# HELP`/`# TYPE` lines and blank lines skipped;
    /// label values unescaped; a line that does not parse is left out).
    public static func parse(_ text: String) -> [PrometheusSample] {
        text.split(separator: "\n").compactMap { line in
            line.hasPrefix("#") ? nil : parseLine(Substring(line))
        }
    }

    static func parseLine(_ line: Substring) -> PrometheusSample? {
        var rest = line[...]
        let name = rest.prefix { $0 != "{" && $0 != " " }
        guard !name.isEmpty else { return nil }
        rest = rest.dropFirst(name.count)
        var labels: [String: String] = [:]
        if rest.first == "{" {
            rest = rest.dropFirst()
            while let first = rest.first, first != "}" {
                if first == "," || first == " " { rest = rest.dropFirst(); continue }
                let key = rest.prefix { $0 != "=" }
                rest = rest.dropFirst(key.count)
                guard rest.hasPrefix("=\"") else { return nil }
                rest = rest.dropFirst(2)
                var value = ""
                var escaped = false
                while let character = rest.popFirst() {
                    if escaped {
                        value.append(character == "n" ? "\n" : character)
                        escaped = false
                    } else if character == "\\" {
                        escaped = true
                    } else if character == "\"" {
                        break
                    } else {
                        value.append(character)
                    }
                }
                labels[String(key)] = value
            }
            guard rest.first == "}" else { return nil }
            rest = rest.dropFirst()
        }
        let fields = rest.split(separator: " ")
        guard let text = fields.first else { return nil }
        let value: Double? =
            switch text {
            case "+Inf": .infinity
            case "-Inf": -.infinity
            case "NaN": .nan
            default: Double(text)
            }
        return value.map { PrometheusSample(name: String(name), labels: labels, value: $0) }
    }
}

extension Array where Element == PrometheusSample {
    /// The sum of the samples named `name` whose labels include `matching`.
    public func sum(_ name: String, _ matching: [String: String] = [:]) -> Double {
        lazy.filter { sample in sample.name == name && matching.allSatisfy { sample.labels[$0.key] == $0.value } }
            .reduce(0) { $0 + $1.value }
    }
}
