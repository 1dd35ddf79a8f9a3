import Foundation

/// Bookkeeping for one account.
struct Ledger {
    private(set) var entries: [Int] = []

    init(entries: [Int] = []) {
        self.entries = entries
    }

    // Adds an entry and returns the new balance.
    mutating func add(_ amount: Int) -> Int {
        precondition(amount != 0, "zero")
        entries.append(amount)
        return balance
    }

    var balance: Int {
        var total = 0
        for e in entries { total += e }
        return total
    }

    subscript(i: Int) -> Int {
        return entries[i]
    }
}

extension Ledger: CustomStringConvertible {
    var description: String { "\(entries.count) entries" }

    func summary() -> String {
        return description
    }
}

protocol Account {
    func balance() -> Int
}

class Bank<T: Account> {
    func total(_ accounts: [T]) -> Int {
        accounts.map { $0.balance() }.reduce(0, +)
    }
}

func summary(_ ledger: Ledger) -> String {
    return ledger.description
}
