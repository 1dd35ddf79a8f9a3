package books

import java.io.File

/** Bookkeeping for one account. */
class Ledger(private val owner: String) {
    private val entries = mutableListOf<Int>()

    // Adds an entry and returns the new balance.
    fun add(amount: Int, note: String? = null): Int {
        require(amount != 0) { "zero" }
        entries.add(amount)
        return balance()
    }

    fun balance(): Int {
        var total = 0
        for (e in entries) total += e
        return total
    }

    companion object {
        fun load(path: String): Ledger = Ledger(File(path).readText())
    }
}

object Registry {
    fun all(): List<Ledger> = emptyList()
}

fun summary(ledger: Ledger): String = "${ledger.balance()} total"
