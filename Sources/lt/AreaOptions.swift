import ArgumentParser

/// An area on the command line — a box, or a centre with a radius — for `lt analysis export`
/// and `lt places query`. Negative coordinates are values (`--bbox -122.5,37.2,-121.9,37.8`,
/// `--lat -33.9`), not options.
struct AreaOptions: ParsableArguments {
    @Option(
        parsing: .unconditional,
        help: "Only inside minLon,minLat,maxLon,maxLat (negative values as they are: --bbox -122.5,37.2,-121.9,37.8).")
    var bbox: String?

    @Option(parsing: .unconditional, help: "The centre's latitude (with --lon).")
    var lat: Double?

    @Option(parsing: .unconditional, help: "The centre's longitude (with --lat).")
    var lon: Double?

    @Option(help: "Metres around the centre.")
    var radius: Double?
}
