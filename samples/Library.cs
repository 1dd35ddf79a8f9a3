using System;
using System.Collections.Generic;

namespace Books
{
    /// <summary>A lending library.</summary>
    public class Library
    {
        private readonly Dictionary<string, int> copies = new();

        public void Add(string isbn)
        {
            copies[isbn] = copies.GetValueOrDefault(isbn) + 1;
        }

        [Obsolete("Use TryLend")]
        public bool Lend(string isbn)
        {
            if (copies.GetValueOrDefault(isbn) == 0)
                return false;
            copies[isbn]--;
            return true;
        }

        public bool Lend(string isbn, int count)
        {
            return count <= copies.GetValueOrDefault(isbn);
        }
    }
}
