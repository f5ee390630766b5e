public import CouchJSON
import CouchProtocol
import Foundation
import Geo
import HTTPTypes
import Logging

/// Crowd-sourced corrections of place positions (the Public Art PDX workflow): users submit a
/// corrected position, admins approve or reject it; approving moves the place (keeping its old
/// position in the document) and bumps the places dataset's version, so devices pull
/// `lt_places` only when it changed.
extension PlaceCatalog {
    /// Creates the reports database (admins only: users see their own reports through the API).
    func prepareCorrections() async throws {
        _ = try await createDatabase(TrackerService.reportsDB)
        let release = try await couch.request(.get, "/\(TrackerService.placesDB)/\(TrackerService.releaseID)")
        if release.status == 404 {
            let created = try await couch.request(
                .put, "/\(TrackerService.placesDB)/\(TrackerService.releaseID)",
                body: ["type": "dataset-release", "dataVersion": 1])
            guard created.ok || created.status == 409 else {
                throw failure(created, "create the places release document")
            }
        }
    }

    /// `POST /api/places/{id}/adjustments`: a user reports a place's corrected position.
    public func submitAdjustment(place id: String, by user: String, body: JSONObject) async throws -> JSON {
        guard let lat = body["latitude"]?.doubleValue ?? body["geometry"]?["coordinates"]?[1]?.doubleValue,
            let lon = body["longitude"]?.doubleValue ?? body["geometry"]?["coordinates"]?[0]?.doubleValue
        else {
            throw Failure(
                400, "bad_request", "Send the corrected position as `latitude` and `longitude` (or a Point `geometry`)")
        }
        do { try Coordinate(lon: lon, lat: lat).validate() } catch let error as GeometryError {
            throw Failure(400, "bad_request", error.reason)
        }
        let place = try await couch.request(.get, "/\(TrackerService.placesDB)/\(CouchURL.encode(id))")
        guard place.ok, place.json["geometry"] != nil else { throw Failure(404, "not_found", "No place \(id)") }
        let original = place.json["geometry"]?["coordinates"]
        let report: JSON = [
            "type": "reported-location", "placeId": .string(id),
            "originalLatitude": original?[1] ?? .null, "originalLongitude": original?[0] ?? .null,
            "geometry": ["type": "Point", "coordinates": [.double(lon), .double(lat)]],
            "reviewStatus": "submitted", "submittedBy": .string(user),
            "submittedDate": .string(Date().ISO8601Format()),
            "comment": body["comment"] ?? .null,
        ]
        let saved = try await couch.request(.post, "/\(TrackerService.reportsDB)", body: report)
        try expect(saved, "save a place report")
        return ["ok": true, "id": saved.json["id"] ?? .null]
    }

    /// Reports, newest first: a user's own (`submittedBy`), or all with a status (admins).
    public func adjustments(submittedBy user: String?, status: String?) async throws -> JSON {
        var selector: JSONObject = ["type": "reported-location"]
        if let user { selector["submittedBy"] = .string(user) }
        if let status { selector["reviewStatus"] = .string(status) }
        let reply = try await couch.request(
            .post, "/\(TrackerService.reportsDB)/_find", body: ["selector": .object(selector), "limit": 10_000])
        try expect(reply, "list place reports")
        let docs = (reply.json["docs"]?.arrayValue ?? []).sorted {
            ($0["submittedDate"]?.stringValue ?? "") > ($1["submittedDate"]?.stringValue ?? "")
        }
        return ["reports": .array(docs)]
    }

    /// An admin's decision on a report: `approve` moves the place (previous position kept in
    /// `previousPositions`, place marked `verified`) and bumps the dataset version; `reject`
    /// only records the decision.
    public func review(report id: String, approve: Bool, by admin: String) async throws -> JSON {
        let reply = try await couch.request(.get, "/\(TrackerService.reportsDB)/\(CouchURL.encode(id))")
        guard reply.ok, var report = reply.json.objectValue, report["type"] == "reported-location" else {
            throw Failure(404, "not_found", "No report \(id)")
        }
        guard report["reviewStatus"] == "submitted" else {
            throw Failure(409, "conflict", "Report \(id) was already reviewed")
        }
        var dataVersion: JSON = .null
        if approve, let placeID = report["placeId"]?.stringValue {
            let placeReply = try await couch.request(.get, "/\(TrackerService.placesDB)/\(CouchURL.encode(placeID))")
            guard placeReply.ok, var place = placeReply.json.objectValue else {
                throw Failure(404, "not_found", "No place \(placeID)")
            }
            var history = place["previousPositions"]?.arrayValue ?? []
            history.append([
                "geometry": place["geometry"] ?? .null, "replacedAt": .string(Date().ISO8601Format()),
                "report": .string(id),
            ])
            place["previousPositions"] = .array(history)
            place["geometry"] = report["geometry"]
            place["verified"] = true
            let saved = try await couch.request(
                .put, "/\(TrackerService.placesDB)/\(CouchURL.encode(placeID))", body: .object(place))
            if saved.status == 409 { throw Failure(409, "conflict", "The place changed meanwhile; review again") }
            try expect(saved, "move place \(placeID)")
            dataVersion = .int(try await bumpRelease())
        }
        report["reviewStatus"] = approve ? "approved" : "rejected"
        report["reviewedBy"] = .string(admin)
        report["reviewedDate"] = .string(Date().ISO8601Format())
        try await expect(
            couch.request(.put, "/\(TrackerService.reportsDB)/\(CouchURL.encode(id))", body: .object(report)),
            "record the review")
        return ["ok": true, "reviewStatus": report["reviewStatus"]!, "dataVersion": dataVersion]
    }

    /// Takes an admin's decision back: the report waits for review again and, if it was
    /// approved, the place returns to where it was before (the release bumped again). 409 when
    /// the report waits already, or when the place has moved since (undo the later change first).
    public func undoReview(report id: String, by admin: String) async throws -> JSON {
        let reply = try await couch.request(.get, "/\(TrackerService.reportsDB)/\(CouchURL.encode(id))")
        guard reply.ok, var report = reply.json.objectValue, report["type"] == "reported-location" else {
            throw Failure(404, "not_found", "No report \(id)")
        }
        guard let decided = report["reviewStatus"]?.stringValue, decided != "submitted" else {
            throw Failure(409, "conflict", "Report \(id) waits for review: there is nothing to undo")
        }
        var dataVersion: JSON = .null
        if decided == "approved", let placeID = report["placeId"]?.stringValue {
            let placeReply = try await couch.request(.get, "/\(TrackerService.placesDB)/\(CouchURL.encode(placeID))")
            guard placeReply.ok, var place = placeReply.json.objectValue else {
                throw Failure(404, "not_found", "No place \(placeID)")
            }
            var history = place["previousPositions"]?.arrayValue ?? []
            guard let last = history.last, last["report"]?.stringValue == id, place["geometry"] == report["geometry"]
            else {
                throw Failure(
                    409, "conflict", "The place has moved since this report was approved: undo the later change first")
            }
            history.removeLast()
            place["geometry"] = last["geometry"]
            place["previousPositions"] = history.isEmpty ? nil : .array(history)
            if history.isEmpty { place["verified"] = nil }
            let saved = try await couch.request(
                .put, "/\(TrackerService.placesDB)/\(CouchURL.encode(placeID))", body: .object(place))
            if saved.status == 409 { throw Failure(409, "conflict", "The place changed meanwhile; try again") }
            try expect(saved, "move place \(placeID) back")
            dataVersion = .int(try await bumpRelease())
        }
        var undone = report["undone"]?.arrayValue ?? []
        undone.append([
            "reviewStatus": .string(decided), "reviewedBy": report["reviewedBy"] ?? .null,
            "reviewedDate": report["reviewedDate"] ?? .null,
            "undoneBy": .string(admin), "undoneDate": .string(Date().ISO8601Format()),
        ])
        report["undone"] = .array(undone)
        report["reviewStatus"] = "submitted"
        report["reviewedBy"] = nil
        report["reviewedDate"] = nil
        let saved = try await couch.request(
            .put, "/\(TrackerService.reportsDB)/\(CouchURL.encode(id))", body: .object(report))
        if saved.status == 409 { throw Failure(409, "conflict", "The report changed meanwhile; try again") }
        try expect(saved, "record the undo")
        logger.info("\(admin) undid the \(decided) review of report \(id)")
        return ["ok": true, "reviewStatus": "submitted", "dataVersion": dataVersion]
    }

    /// The places dataset's version (devices compare it with theirs before pulling `lt_places`).
    public func placesVersion() async throws -> JSON {
        let reply = try await couch.request(.get, "/\(TrackerService.placesDB)/\(TrackerService.releaseID)")
        try expect(reply, "read the places release")
        return ["dataVersion": reply.json["dataVersion"] ?? 1]
    }

    /// Adds one to `dataVersion`, retrying on a concurrent bump.
    func bumpRelease() async throws -> Int {
        for _ in 0..<10 {
            let reply = try await couch.request(.get, "/\(TrackerService.placesDB)/\(TrackerService.releaseID)")
            try expect(reply, "read the places release")
            guard var doc = reply.json.objectValue else { break }
            let next = (doc["dataVersion"]?.intValue ?? 1) + 1
            doc["dataVersion"] = .int(next)
            let saved = try await couch.request(
                .put, "/\(TrackerService.placesDB)/\(TrackerService.releaseID)", body: .object(doc))
            if saved.ok { return next }
            if saved.status != 409 { throw failure(saved, "bump the places release") }
        }
        throw Failure(503, "conflict", "The places release is changing too often; try again")
    }
}
